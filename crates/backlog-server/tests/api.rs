//! The HTTP API on every backend: what each endpoint does, the worker protocol's fencing, and
//! bad input that gets the right status and changes nothing.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use backlog::{Client, ManualClock};
use backlog_server::ServerConfig;
use backlog_testdb::{Engine, TestDb};
use common::{ADMIN, Api, PRODUCE, READ};
use serde_json::{Value, json};

async fn enqueue_show_list_and_page(engine: Engine) {
    let api = Api::new(engine).await;
    let (status, one) = api
        .post(
            "/api/v1/jobs",
            json!({"queue": "mail", "payload": {"to": "a@example.com"}, "kind": "welcome",
                   "priority": -1, "max_attempts": 3, "unique_key": "user-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{one}");
    assert_eq!(one["created"], true);
    let id = one["id"].as_i64().unwrap();

    let job = api
        .ok(Method::GET, &format!("/api/v1/jobs/{id}"), None)
        .await;
    assert_eq!(
        job["payload"],
        json!({"to": "a@example.com"}),
        "payload is JSON"
    );
    assert_eq!(
        (&job["queue"], &job["kind"], &job["state"], &job["priority"]),
        (
            &json!("mail"),
            &json!("welcome"),
            &json!("available"),
            &json!(-1)
        )
    );
    assert_eq!(
        (&job["max_attempts"], &job["unique_key"]),
        (&json!(3), &json!("user-1"))
    );
    assert!(job["created_at_rfc3339"].as_str().unwrap().ends_with('Z'));

    // The same unique key while the job is pending: 409, naming the holder.
    let taken = api
        .fails(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "mail", "payload": {}, "unique_key": "user-1"})),
            StatusCode::CONFLICT,
            "unique_key_taken",
        )
        .await;
    assert_eq!(taken["error"]["job_id"], id);

    // A batch: in order, one outcome each; a taken key creates nothing and names the holder.
    let batch: Vec<Value> = (0..5)
        .map(|i| json!({"queue": "mail", "payload": {"n": i}, "kind": if i % 2 == 0 { "even" } else { "odd" }}))
        .chain([json!({"queue": "mail", "payload": {}, "unique_key": "user-1"})])
        .collect();
    let out = api
        .ok(
            Method::POST,
            "/api/v1/jobs/batch",
            Some(json!({"jobs": batch})),
        )
        .await;
    let outs = out["jobs"].as_array().unwrap();
    assert_eq!(outs.len(), 6);
    assert_eq!(
        (&outs[5]["id"], &outs[5]["created"]),
        (&json!(id), &json!(false))
    );
    assert!(outs[..5].iter().all(|o| o["created"] == true));

    // Filters and paging: pages of 2 over the 6 jobs, then by kind and state.
    let mut seen = vec![];
    let mut next = Value::Null;
    loop {
        let path = match next.as_i64() {
            Some(after) => format!("/api/v1/jobs?queue=mail&limit=2&after={after}"),
            None => "/api/v1/jobs?queue=mail&limit=2".into(),
        };
        let page = api.ok(Method::GET, &path, None).await;
        seen.extend(
            page["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].as_i64().unwrap()),
        );
        next = page["next"].clone();
        if next.is_null() {
            break;
        }
        // A job enqueued between pages lands after the cursor: nothing is skipped or repeated.
        if seen.len() == 2 {
            api.ok(
                Method::POST,
                "/api/v1/jobs",
                Some(json!({"queue": "mail", "payload": {}})),
            )
            .await;
        }
    }
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    let by_key = api
        .ok(Method::GET, "/api/v1/jobs?unique_key=user-1", None)
        .await;
    assert_eq!(by_key["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(by_key["jobs"][0]["id"], id);
    api.fails(
        Method::GET,
        "/api/v1/jobs?unique_key=",
        None,
        StatusCode::BAD_REQUEST,
        "unique_key_invalid",
    )
    .await;
    let even = api
        .ok(Method::GET, "/api/v1/jobs?queue=mail&kind=even", None)
        .await;
    assert_eq!(even["jobs"].as_array().unwrap().len(), 3);
    let avail = api
        .ok(
            Method::GET,
            "/api/v1/jobs?queue=mail&kind=odd&state=available",
            None,
        )
        .await;
    assert_eq!(avail["jobs"].as_array().unwrap().len(), 2);

    // A delayed job is scheduled; stats agree.
    api.ok(
        Method::POST,
        "/api/v1/jobs",
        Some(json!({"queue": "later", "payload": [1, 2], "delay": "1h"})),
    )
    .await;
    let stats = api.ok(Method::GET, "/api/v1/stats", None).await;
    assert_eq!(stats["mail"]["available"], 7);
    assert_eq!(stats["later"]["scheduled"], 1);
    let one_queue = api.ok(Method::GET, "/api/v1/stats?queue=later", None).await;
    assert_eq!(one_queue.as_object().unwrap().len(), 1);

    api.fails(
        Method::GET,
        "/api/v1/jobs/999999",
        None,
        StatusCode::NOT_FOUND,
        "job_not_found",
    )
    .await;
    // Run-now: a scheduled job is due at once; a job in another state (held) is refused.
    let (_, later) = api
        .post(
            "/api/v1/jobs",
            json!({"queue": "mail", "payload": {}, "delay": "1h"}),
        )
        .await;
    let later = later["id"].as_i64().unwrap();
    let shown = api
        .ok(Method::GET, &format!("/api/v1/jobs/{later}"), None)
        .await;
    assert_eq!(shown["reported_state"], "scheduled", "{shown}");
    let ran = api
        .ok(Method::POST, &format!("/api/v1/jobs/{later}/run-now"), None)
        .await;
    assert_eq!(ran["reported_state"], "available", "{ran}");
    api.ok(Method::POST, &format!("/api/v1/jobs/{later}/hold"), None)
        .await;
    api.fails(
        Method::POST,
        &format!("/api/v1/jobs/{later}/run-now"),
        None,
        StatusCode::CONFLICT,
        "job_state_conflict",
    )
    .await;
    api.ok(Method::POST, &format!("/api/v1/jobs/{later}/cancel"), None)
        .await;
    api.done().await;
}

/// The worker protocol, fenced by the lease token: a worker whose lease was rescued and given
/// to another gets 409 and changes nothing.
async fn worker_protocol_is_fenced(engine: Engine) {
    let db = TestDb::new(engine).await;
    let clock = ManualClock::new(backlog_core::now_micros());
    let client = Arc::new(
        Client::connect(&db.url)
            .await
            .unwrap()
            .with_clock(Arc::new(clock.clone())),
    );
    let api = Api::with(
        db,
        client,
        ServerConfig::new("127.0.0.1:0".parse().unwrap()),
    );
    let id = api
        .ok(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "w", "payload": {"x": 1}, "kind": "k"})),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let claimed = api
        .ok(
            Method::POST,
            "/api/v1/queues/w/claim",
            Some(json!({"limit": 10, "lease": "10s", "kinds": ["k"], "worker": "w-1"})),
        )
        .await;
    let jobs = claimed["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (&jobs[0]["id"], &jobs[0]["attempt"]),
        (&json!(id), &json!(1))
    );
    assert_eq!(jobs[0]["payload"], json!({"x": 1}));
    let old = jobs[0]["token"].as_str().unwrap().to_owned();
    let shown = api
        .ok(Method::GET, &format!("/api/v1/jobs/{id}"), None)
        .await;
    assert_eq!(
        (&shown["state"], &shown["lease_owner"]),
        (&json!("running"), &json!("w-1"))
    );

    // Heartbeat and progress with the current token.
    let hb = api
        .ok(
            Method::POST,
            &format!("/api/v1/jobs/{id}/heartbeat"),
            Some(json!({"token": old, "lease": "20s"})),
        )
        .await;
    assert_eq!(hb["cancel_requested"], false);
    api.ok(
        Method::POST,
        &format!("/api/v1/jobs/{id}/progress"),
        Some(json!({"token": old, "progress": {"pct": 50}})),
    )
    .await;
    // The worker goes quiet; its lease runs out and another worker's claim rescues the job.
    clock.advance(Duration::from_secs(60));
    let again = api
        .ok(
            Method::POST,
            "/api/v1/queues/w/claim",
            Some(json!({"lease": "30s"})),
        )
        .await;
    let new = again["jobs"][0]["token"].as_str().unwrap().to_owned();
    assert_eq!(again["jobs"][0]["attempt"], 2);
    assert_ne!(old, new);
    // Every late call of the first worker is refused and changes nothing.
    for (path, body) in [
        (
            format!("/api/v1/jobs/{id}/complete"),
            json!({"token": old, "result": {"late": true}}),
        ),
        (
            format!("/api/v1/jobs/{id}/fail"),
            json!({"token": old, "error": "late"}),
        ),
        (
            format!("/api/v1/jobs/{id}/heartbeat"),
            json!({"token": old}),
        ),
        (
            format!("/api/v1/jobs/{id}/progress"),
            json!({"token": old, "progress": 1}),
        ),
    ] {
        let v = api
            .fails(
                Method::POST,
                &path,
                Some(body),
                StatusCode::CONFLICT,
                "lease_lost",
            )
            .await;
        assert_eq!(v["error"]["job_id"], id);
    }
    let batch = api
        .ok(
            Method::POST,
            "/api/v1/queues/w/complete",
            Some(json!({"jobs": [{"id": id, "token": old}]})),
        )
        .await;
    assert_eq!(
        (&batch["completed"], &batch["lost"]),
        (&json!([]), &json!([id]))
    );
    let shown = api
        .ok(Method::GET, &format!("/api/v1/jobs/{id}"), None)
        .await;
    assert_eq!(
        (&shown["state"], &shown["attempt"]),
        (&json!("running"), &json!(2))
    );
    assert_eq!(shown["result"], Value::Null);

    // The current holder fails it: retried after the delay it asked for.
    let failed = api
        .ok(
            Method::POST,
            &format!("/api/v1/jobs/{id}/fail"),
            Some(json!({"token": new, "error": "boom", "retry_in": "5s"})),
        )
        .await;
    assert_eq!(failed["outcome"], "retry");
    let shown = api
        .ok(Method::GET, &format!("/api/v1/jobs/{id}"), None)
        .await;
    assert_eq!(shown["reported_state"], "retrying");
    assert_eq!(
        shown["errors"].as_array().unwrap().len(),
        2,
        "rescue and failure: {shown}"
    );
    // Counted where it is reported, and listed there alone.
    let counts = api.ok(Method::GET, "/api/v1/queues/w", None).await;
    assert_eq!(counts["stats"]["retrying"], 1, "{counts}");
    assert_eq!(counts["stats"]["scheduled"], 0, "{counts}");
    let listed = api
        .ok(Method::GET, "/api/v1/jobs?queue=w&state=scheduled", None)
        .await;
    assert_eq!(listed["jobs"].as_array().map(Vec::len), Some(0), "{listed}");
    clock.advance(Duration::from_secs(6));
    let third = api
        .ok(Method::POST, "/api/v1/queues/w/claim", Some(json!({})))
        .await;
    let t3 = third["jobs"][0]["token"].clone();
    let done = api
        .ok(
            Method::POST,
            &format!("/api/v1/jobs/{id}/complete"),
            Some(json!({"token": t3, "result": {"sent": 1}})),
        )
        .await;
    assert_eq!(done["outcome"], "completed");
    let shown = api
        .ok(Method::GET, &format!("/api/v1/jobs/{id}"), None)
        .await;
    assert_eq!(
        (&shown["state"], &shown["result"]),
        (&json!("completed"), &json!({"sent": 1}))
    );

    // Batch completion, and a discard that makes a job dead at once.
    let ids: Vec<i64> = api
        .ok(Method::POST, "/api/v1/jobs/batch", Some(json!({"jobs": [
            {"queue": "w", "payload": 1}, {"queue": "w", "payload": 2}, {"queue": "w", "payload": 3}]})))
        .await["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect();
    let got = api
        .ok(
            Method::POST,
            "/api/v1/queues/w/claim",
            Some(json!({"limit": 3})),
        )
        .await;
    let got = got["jobs"].as_array().unwrap();
    assert_eq!(got.len(), 3);
    let refs: Vec<Value> = got[..2]
        .iter()
        .map(|j| json!({"id": j["id"], "token": j["token"]}))
        .collect();
    let batch = api
        .ok(
            Method::POST,
            "/api/v1/queues/w/complete",
            Some(json!({"jobs": refs})),
        )
        .await;
    assert_eq!(batch["completed"].as_array().unwrap().len(), 2);
    let last = &got[2];
    let dead = api
        .ok(
            Method::POST,
            &format!("/api/v1/jobs/{}/fail", last["id"]),
            Some(json!({"token": last["token"], "error": "bad input", "discard": true})),
        )
        .await;
    assert_eq!(dead["outcome"], "dead");
    let dead_list = api.ok(Method::GET, "/api/v1/queues/w/dead", None).await;
    assert_eq!(dead_list["jobs"][0]["id"], last["id"]);
    assert_eq!(ids.len(), 3);
    api.done().await;
}

async fn queue_administration(engine: Engine) {
    let api = Api::new(engine).await;
    let q = api
        .ok(
            Method::PATCH,
            "/api/v1/queues/reports",
            Some(
                json!({"max_attempts": 2, "backoff_base": "2s", "backoff_max": "1m", "lease": "45s",
                        "order": "lifo", "retention": "archive", "concurrency": 4,
                        "global_concurrency": 7, "group_concurrency": 2,
                        "group_on_failure": "next", "rate_limit": "50/1m",
                        "group_rate_limit": "5/1s", "shards": 8}),
            ),
        )
        .await;
    assert_eq!(
        q["settings"],
        json!({"name": "reports", "paused": false, "max_attempts": 2, "backoff_base": "2s",
               "backoff_max": "1m", "lease": "45s", "order": "lifo", "retention": "archive",
               "concurrency": 4, "global_concurrency": 7, "group_concurrency": 2,
               "group_on_failure": "next", "rate_limit": "50/1m", "group_rate_limit": "5/1s",
               "shards": 8})
    );
    assert_eq!(
        q["flow"],
        json!({"running": 0, "waiting": 0, "waiting_groups": 0, "blocked": []})
    );
    // `null` lifts the global limit, and gives the concurrency back to each worker; bad values
    // change nothing.
    let lifted = api
        .ok(
            Method::PATCH,
            "/api/v1/queues/reports",
            Some(json!({"global_concurrency": null})),
        )
        .await;
    assert_eq!(lifted["settings"]["global_concurrency"], json!(null));
    assert_eq!(
        lifted["settings"]["concurrency"],
        json!(4),
        "left out: kept"
    );
    let own = api
        .ok(
            Method::PATCH,
            "/api/v1/queues/reports",
            Some(json!({"concurrency": null})),
        )
        .await;
    assert_eq!(own["settings"]["concurrency"], json!(null));
    api.ok(
        Method::PATCH,
        "/api/v1/queues/reports",
        Some(json!({"concurrency": 4})),
    )
    .await;
    for (bad, code) in [
        (json!({"global_concurrency": 0}), "value_out_of_range"),
        (json!({"group_concurrency": 0}), "value_out_of_range"),
        (json!({"group_on_failure": "skip"}), "option_invalid"),
        (json!({"rate_limit": "0/1s"}), "option_invalid"),
        (json!({"group_rate_limit": "5/never"}), "option_invalid"),
        (json!({"group_rate_limit": 5}), "body_invalid"),
        (json!({"shards": 0}), "value_out_of_range"),
        (json!({"shards": 257}), "value_out_of_range"),
        (json!({"shards": -1}), "body_invalid"),
        (json!({"shards": "8"}), "body_invalid"),
    ] {
        api.fails(
            Method::PATCH,
            "/api/v1/queues/reports",
            Some(bad),
            StatusCode::BAD_REQUEST,
            code,
        )
        .await;
    }
    let unchanged = api.ok(Method::GET, "/api/v1/queues/reports", None).await;
    assert_eq!(unchanged["settings"]["group_concurrency"], json!(2));
    assert_eq!(unchanged["settings"]["group_rate_limit"], json!("5/1s"));
    assert_eq!(unchanged["settings"]["shards"], json!(8));
    // A partial change keeps the rest.
    let q = api
        .ok(
            Method::PATCH,
            "/api/v1/queues/reports",
            Some(json!({"order": "fifo"})),
        )
        .await;
    assert_eq!(
        (&q["settings"]["order"], &q["settings"]["max_attempts"]),
        (&json!("fifo"), &json!(2))
    );

    api.ok(
        Method::POST,
        "/api/v1/jobs",
        Some(json!({"queue": "reports", "payload": {}})),
    )
    .await;
    let paused = api
        .ok(Method::POST, "/api/v1/queues/reports/pause", None)
        .await;
    assert_eq!(paused["settings"]["paused"], true);
    let none = api
        .ok(
            Method::POST,
            "/api/v1/queues/reports/claim",
            Some(json!({})),
        )
        .await;
    assert_eq!(none["jobs"], json!([]), "a paused queue hands out nothing");
    let list = api.ok(Method::GET, "/api/v1/queues", None).await;
    let reports = list["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["settings"]["name"] == "reports")
        .unwrap()
        .clone();
    assert_eq!(
        (
            &reports["settings"]["paused"],
            &reports["stats"]["available"]
        ),
        (&json!(true), &json!(1))
    );
    api.ok(Method::POST, "/api/v1/queues/reports/resume", None)
        .await;

    // Operator actions on one job: hold, release, cancel, retry; a wrong state is 409.
    let id = api
        .ok(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "ops", "payload": {}})),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let path = |a: &str| format!("/api/v1/jobs/{id}/{a}");
    assert_eq!(
        api.ok(Method::POST, &path("hold"), None).await["state"],
        "held"
    );
    api.fails(
        Method::POST,
        &path("hold"),
        None,
        StatusCode::CONFLICT,
        "job_state_conflict",
    )
    .await;
    assert_eq!(
        api.ok(Method::POST, &path("release"), None).await["state"],
        "available"
    );
    assert_eq!(
        api.ok(Method::POST, &path("cancel"), None).await["state"],
        "cancelled"
    );
    assert_eq!(
        api.ok(Method::POST, &path("retry"), None).await["state"],
        "available"
    );
    api.fails(
        Method::POST,
        "/api/v1/jobs/424242/retry",
        None,
        StatusCode::NOT_FOUND,
        "job_not_found",
    )
    .await;

    // Dead letters and redrive.
    for _ in 0..3 {
        api.ok(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "dl", "payload": {}, "max_attempts": 1})),
        )
        .await;
    }
    let claimed = api
        .ok(
            Method::POST,
            "/api/v1/queues/dl/claim",
            Some(json!({"limit": 3})),
        )
        .await;
    for j in claimed["jobs"].as_array().unwrap() {
        let v = api
            .ok(
                Method::POST,
                &format!("/api/v1/jobs/{}/fail", j["id"]),
                Some(json!({"token": j["token"], "error": "nope"})),
            )
            .await;
        assert_eq!(v["outcome"], "dead", "max attempts 1");
    }
    let dead = api
        .ok(Method::GET, "/api/v1/queues/dl/dead?limit=2", None)
        .await;
    assert_eq!(dead["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(dead["jobs"][0]["errors"][0]["error"], "nope");
    let rest = api
        .ok(
            Method::GET,
            &format!("/api/v1/queues/dl/dead?after={}", dead["next"]),
            None,
        )
        .await;
    assert_eq!(
        (rest["jobs"].as_array().unwrap().len(), &rest["next"]),
        (1, &Value::Null)
    );
    let r = api
        .ok(
            Method::POST,
            "/api/v1/queues/dl/redrive",
            Some(json!({"limit": 2})),
        )
        .await;
    assert_eq!(r["redriven"], 2);
    let r = api
        .ok(Method::POST, "/api/v1/queues/dl/redrive", Some(json!({})))
        .await;
    assert_eq!(r["redriven"], 1);
    let stats = api.ok(Method::GET, "/api/v1/stats?queue=dl", None).await;
    assert_eq!(
        (&stats["dl"]["available"], &stats["dl"]["dead"]),
        (&json!(3), &json!(0))
    );

    // Bulk actions: every job a filter matches, or the ids given; audited as one action.
    let r = api
        .ok(
            Method::POST,
            "/api/v1/jobs/bulk",
            Some(json!({"action": "hold", "queue": "dl", "state": "available"})),
        )
        .await;
    assert_eq!((&r["seen"], &r["changed"]), (&json!(3), &json!(3)));
    let held = api
        .ok(Method::GET, "/api/v1/jobs?queue=dl&state=held", None)
        .await;
    let ids: Vec<i64> = held["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    let r = api
        .ok(
            Method::POST,
            "/api/v1/jobs/bulk",
            Some(json!({"action": "release", "ids": [ids[0], ids[1], 424242]})),
        )
        .await;
    assert_eq!(
        (&r["seen"], &r["changed"]),
        (&json!(3), &json!(2)),
        "an id that is no job is passed over"
    );
    let r = api
        .ok(
            Method::POST,
            "/api/v1/jobs/bulk",
            Some(json!({"action": "cancel", "queue": "dl", "older_than": "1h"})),
        )
        .await;
    assert_eq!(r["seen"], 0, "no job of dl is an hour old");
    let stats = api.ok(Method::GET, "/api/v1/stats?queue=dl", None).await;
    assert_eq!(
        (&stats["dl"]["available"], &stats["dl"]["held"]),
        (&json!(2), &json!(1))
    );
    let audit = api
        .ok(Method::GET, "/api/v1/audit?action=job.bulk", None)
        .await;
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "{audit}");
    assert_eq!(entries[1]["detail"]["changed"], 2);

    // Delete one job: answered as it was, gone after, audited; again: 404.
    let gone = api
        .ok(Method::DELETE, &format!("/api/v1/jobs/{}", ids[2]), None)
        .await;
    assert_eq!(
        (&gone["id"], &gone["state"]),
        (&json!(ids[2]), &json!("held"))
    );
    api.fails(
        Method::GET,
        &format!("/api/v1/jobs/{}", ids[2]),
        None,
        StatusCode::NOT_FOUND,
        "job_not_found",
    )
    .await;
    api.fails(
        Method::DELETE,
        &format!("/api/v1/jobs/{}", ids[2]),
        None,
        StatusCode::NOT_FOUND,
        "job_not_found",
    )
    .await;
    let audit = api
        .ok(Method::GET, "/api/v1/audit?action=job.delete", None)
        .await;
    assert_eq!(audit["entries"][0]["job_id"], ids[2], "{audit}");
    assert_eq!(audit["entries"][0]["detail"]["state"], "held", "{audit}");

    // A bulk delete started without waiting: answered at once with an id, its progress read
    // until done, audited once when it ends.
    let started = api
        .call(
            Method::POST,
            "/api/v1/jobs/bulk",
            Some(json!({"action": "delete", "queue": "dl", "wait": false})),
        )
        .await;
    assert_eq!(started.0, StatusCode::ACCEPTED, "{}", started.1);
    let path = format!("/api/v1/jobs/bulk/{}", started.1["id"]);
    let end = loop {
        let s = api.ok(Method::GET, &path, None).await;
        if s["done"] == json!(true) {
            break s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(
        (
            &end["action"],
            &end["queue"],
            &end["seen"],
            &end["changed"],
            &end["error"]
        ),
        (
            &json!("delete"),
            &json!("dl"),
            &json!(2),
            &json!(2),
            &Value::Null
        ),
        "{end}"
    );
    let stats = api.ok(Method::GET, "/api/v1/stats?queue=dl", None).await;
    assert_eq!(stats["dl"]["available"], 0, "{stats}");
    let audit = api
        .ok(Method::GET, "/api/v1/audit?action=job.bulk", None)
        .await;
    assert_eq!(audit["entries"][0]["detail"]["action"], "delete", "{audit}");
    assert_eq!(audit["entries"][0]["detail"]["changed"], 2, "{audit}");
    api.fails(
        Method::GET,
        "/api/v1/jobs/bulk/999999",
        None,
        StatusCode::NOT_FOUND,
        "bulk_not_found",
    )
    .await;
    api.done().await;
}

/// Bad input of every kind: the right status and code, and nothing changed.
async fn bad_input_changes_nothing(engine: Engine) {
    let db = TestDb::new(engine).await;
    let client = Arc::new(
        Client::connect(&db.url)
            .await
            .unwrap()
            .with_payload_limit(1024),
    );
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.body_limit = 64 * 1024;
    let api = Api::with(db, client, config);
    api.ok(
        Method::PATCH,
        "/api/v1/queues/q",
        Some(json!({"max_attempts": 5})),
    )
    .await;
    let before_settings = api.ok(Method::GET, "/api/v1/queues/q", None).await;
    use StatusCode as S;
    let cases: Vec<(Method, &str, Value, S, &str)> = vec![
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "explode", "queue": "q"}),
            S::BAD_REQUEST,
            "option_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "retry"}),
            S::BAD_REQUEST,
            "bulk_selection_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "retry", "ids": [1], "queue": "q"}),
            S::BAD_REQUEST,
            "bulk_selection_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "retry", "ids": []}),
            S::BAD_REQUEST,
            "bulk_selection_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "retry", "ids": [1], "state": "dead"}),
            S::BAD_REQUEST,
            "bulk_selection_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "retry", "queue": "q", "state": "gone"}),
            S::BAD_REQUEST,
            "state_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "retry", "queue": "q", "older_than": "soon"}),
            S::BAD_REQUEST,
            "duration_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "retry", "queue": "no-such-queue"}),
            S::NOT_FOUND,
            "queue_not_found",
        ),
        (
            Method::POST,
            "/api/v1/jobs/bulk",
            json!({"action": "delete", "queue": "q", "wait": "later"}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
        (
            Method::DELETE,
            "/api/v1/jobs/424242",
            json!(null),
            S::NOT_FOUND,
            "job_not_found",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"payload": {}}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q"}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": 7, "payload": {}}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": {}, "priority": "high"}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": {}, "colour": "red"}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q; DROP TABLE backlog_job", "payload": {}}),
            S::BAD_REQUEST,
            "queue_name_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "", "payload": {}}),
            S::BAD_REQUEST,
            "queue_name_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": {}, "kind": "a b"}),
            S::BAD_REQUEST,
            "kind_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": {}, "delay": "soon"}),
            S::BAD_REQUEST,
            "duration_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": {}, "max_attempts": 0}),
            S::BAD_REQUEST,
            "value_out_of_range",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": {}, "unique_key": ""}),
            S::BAD_REQUEST,
            "unique_key_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": "x".repeat(2000)}),
            S::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": "x".repeat(70_000)}),
            S::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            Method::POST,
            "/api/v1/jobs/batch",
            json!({"jobs": []}),
            S::BAD_REQUEST,
            "batch_size_invalid",
        ),
        // One bad job fails the whole batch before anything is written.
        (
            Method::POST,
            "/api/v1/jobs/batch",
            json!({"jobs": [{"queue": "q", "payload": 1}, {"queue": "q!", "payload": 2}]}),
            S::BAD_REQUEST,
            "queue_name_invalid",
        ),
        (
            Method::GET,
            "/api/v1/jobs?state=done",
            Value::Null,
            S::BAD_REQUEST,
            "state_invalid",
        ),
        (
            Method::GET,
            "/api/v1/jobs?limit=0",
            Value::Null,
            S::BAD_REQUEST,
            "value_out_of_range",
        ),
        (
            Method::GET,
            "/api/v1/jobs?limit=abc",
            Value::Null,
            S::BAD_REQUEST,
            "query_invalid",
        ),
        (
            Method::GET,
            "/api/v1/jobs?bogus=1",
            Value::Null,
            S::BAD_REQUEST,
            "query_invalid",
        ),
        (
            Method::GET,
            "/api/v1/jobs/abc",
            Value::Null,
            S::BAD_REQUEST,
            "path_invalid",
        ),
        (
            Method::GET,
            "/api/v1/queues/bad%20name",
            Value::Null,
            S::BAD_REQUEST,
            "queue_name_invalid",
        ),
        (
            Method::PATCH,
            "/api/v1/queues/q",
            json!({"max_attempts": 0}),
            S::BAD_REQUEST,
            "value_out_of_range",
        ),
        (
            Method::PATCH,
            "/api/v1/queues/q",
            json!({"retention": "forever"}),
            S::BAD_REQUEST,
            "option_invalid",
        ),
        (
            Method::PATCH,
            "/api/v1/queues/q",
            json!({"lease": "-1s"}),
            S::BAD_REQUEST,
            "duration_invalid",
        ),
        (
            Method::PATCH,
            "/api/v1/queues/q",
            json!({"backoff_base": "2h", "backoff_max": "1h"}),
            S::BAD_REQUEST,
            "option_invalid",
        ),
        (
            Method::PATCH,
            "/api/v1/queues/q",
            json!({"speed": "fast"}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
        (
            Method::POST,
            "/api/v1/queues/q/redrive",
            json!({"limit": 0}),
            S::BAD_REQUEST,
            "value_out_of_range",
        ),
        (
            Method::POST,
            "/api/v1/queues/q/claim",
            json!({"limit": 0}),
            S::BAD_REQUEST,
            "value_out_of_range",
        ),
        (
            Method::POST,
            "/api/v1/queues/q/claim",
            json!({"lease": "0s"}),
            S::BAD_REQUEST,
            "value_out_of_range",
        ),
        (
            Method::POST,
            "/api/v1/queues/q/claim",
            json!({"kinds": ["a b"]}),
            S::BAD_REQUEST,
            "kind_invalid",
        ),
        (
            Method::POST,
            "/api/v1/queues/q/complete",
            json!({"jobs": [{"id": 1, "token": "not-a-token"}]}),
            S::BAD_REQUEST,
            "token_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/1/fail",
            json!({"token": "1", "error": "x", "discard": true, "retry_in": "1s"}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
        (
            Method::POST,
            "/api/v1/jobs/1/heartbeat",
            json!({}),
            S::BAD_REQUEST,
            "body_invalid",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let body = (!body.is_null()).then_some(body);
        api.fails(method, path, body, status, code).await;
    }
    // Not JSON at all, and JSON without its content type.
    let (s, v) = api
        .raw(
            None,
            Method::POST,
            "/api/v1/jobs",
            Some("{not json".into()),
            "application/json",
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (S::BAD_REQUEST, Some("body_invalid"))
    );
    let (s, v) = api
        .raw(
            None,
            Method::POST,
            "/api/v1/jobs",
            Some(r#"{"queue":"q","payload":1}"#.into()),
            "text/plain",
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (S::UNSUPPORTED_MEDIA_TYPE, Some("content_type_invalid"))
    );

    // A queue with neither settings nor jobs (a typo): 404, and nothing is created.
    for (method, path, body) in [
        (Method::GET, "/api/v1/queues/nope", None),
        (Method::GET, "/api/v1/queues/nope/dead", None),
        (Method::POST, "/api/v1/queues/nope/pause", None),
        (Method::POST, "/api/v1/queues/nope/resume", None),
        (Method::POST, "/api/v1/queues/nope/redrive", Some(json!({}))),
    ] {
        api.fails(method, path, body, S::NOT_FOUND, "queue_not_found")
            .await;
    }
    let names: Vec<Value> = api.ok(Method::GET, "/api/v1/queues", None).await["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["settings"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("q")], "no queue was created");

    assert_eq!(api.total_jobs().await, 0, "no bad request created a job");
    assert_eq!(
        api.ok(Method::GET, "/api/v1/queues/q", None).await,
        before_settings
    );
    api.done().await;
}

/// What the server refuses as bad input, the document's schemas refuse too: a client generated
/// from the document cannot send it.
async fn the_document_refuses_what_the_server_refuses(engine: Engine) {
    let api = Api::new(engine).await;
    let cases = [
        (Method::POST, "/api/v1/queues/q/claim", json!({"limit": 0})),
        (
            Method::POST,
            "/api/v1/queues/q/claim",
            json!({"limit": 1001}),
        ),
        (Method::POST, "/api/v1/jobs/batch", json!({"jobs": []})),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "", "payload": {}}),
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "a b", "payload": {}}),
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": {}, "kind": "x/y"}),
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            json!({"queue": "q", "payload": {}, "unique_key": ""}),
        ),
        (
            Method::PATCH,
            "/api/v1/queues/q",
            json!({"retention": "forever"}),
        ),
        (
            Method::PATCH,
            "/api/v1/queues/q",
            json!({"order": "random"}),
        ),
        (Method::PATCH, "/api/v1/queues/q", json!({"shards": 0})),
        (
            Method::POST,
            "/api/v1/queues/q/redrive",
            json!({"limit": 0}),
        ),
        (
            Method::POST,
            "/api/v1/queues/q/complete",
            json!({"jobs": []}),
        ),
        (
            Method::POST,
            "/api/v1/jobs/1/complete",
            json!({"token": ""}),
        ),
        (
            Method::POST,
            "/api/v1/jobs/1/complete",
            json!({"token": "abc"}),
        ),
    ];
    for (method, path, body) in cases {
        assert!(
            !api.schema_accepts(&method, path, &body),
            "the document takes {method} {path} {body}"
        );
        let (status, v) = api.call(method.clone(), path, Some(body.clone())).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{method} {path} {body}: {v}"
        );
    }
    // And what the document takes, the server takes: JSON Schema counts 2.0 an integer (of a
    // queue that exists: a redrive of another is 404).
    api.ok(
        Method::PATCH,
        "/api/v1/queues/q",
        Some(json!({"max_attempts": 3})),
    )
    .await;
    for (path, body) in [
        ("/api/v1/queues/q/claim", json!({"limit": 2.0})),
        ("/api/v1/queues/q/redrive", json!({"limit": 5.0})),
    ] {
        let (status, v) = api.call(Method::POST, path, Some(body.clone())).await;
        assert_eq!(status, StatusCode::OK, "{path} {body}: {v}");
    }
    let half = Some(json!({"limit": 2.5}));
    let (status, _) = api.call(Method::POST, "/api/v1/queues/q/claim", half).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    api.done().await;
}

/// Without a token: 401; with the wrong scope: 403; each scope does what it names.
async fn tokens_and_scopes(engine: Engine) {
    let db = TestDb::new(engine).await;
    let client = db.client.clone();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tokens = common::tokens();
    let api = Api::with(db, client, config);
    let enqueue = json!({"queue": "s", "payload": {}});
    let (s, v) = api.call_as(None, Method::GET, "/api/v1/stats", None).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (s, _) = api
        .call_as(
            Some("wrong-secret-0123456789"),
            Method::GET,
            "/api/v1/stats",
            None,
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = api.call_as(None, Method::GET, "/metrics", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // The scheme is case-insensitive; an empty secret or another scheme is no token.
    for (header, status) in [
        (format!("bearer {ADMIN}"), StatusCode::OK),
        (format!("BEARER  {ADMIN} "), StatusCode::OK),
        ("Bearer ".to_owned(), StatusCode::UNAUTHORIZED),
        (format!("Basic {ADMIN}"), StatusCode::UNAUTHORIZED),
    ] {
        let headers = [("authorization", header.as_str())];
        let (s, v) = api
            .raw_with(None, Method::GET, "/api/v1/stats", None, "", &headers)
            .await;
        assert_eq!(s, status, "{header:?}: {v}");
    }
    // Health checks need no token.
    assert_eq!(
        api.call_as(None, Method::GET, "/healthz", None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        api.call_as(None, Method::GET, "/readyz", None).await.0,
        StatusCode::OK
    );

    // Each token learns its own name and scope; no token or a wrong one learns nothing.
    for (token, name, scope) in [
        (ADMIN, "ops", "admin"),
        (PRODUCE, "ci", "produce"),
        (READ, "viewer", "read"),
    ] {
        let (s, v) = api
            .call_as(Some(token), Method::GET, "/api/v1/me", None)
            .await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(v, json!({"name": name, "scope": scope}));
    }
    let (s, v) = api.call_as(None, Method::GET, "/api/v1/me", None).await;
    assert_eq!(
        (s, &v["error"]["code"]),
        (StatusCode::UNAUTHORIZED, &json!("unauthorized"))
    );

    // read: inspect only.
    assert_eq!(
        api.call_as(Some(READ), Method::GET, "/api/v1/stats", None)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        api.call_as(Some(READ), Method::GET, "/metrics", None)
            .await
            .0,
        StatusCode::OK
    );
    let (s, v) = api
        .call_as(
            Some(READ),
            Method::POST,
            "/api/v1/jobs",
            Some(enqueue.clone()),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden"))
    );
    // produce: enqueue and work, not inspect or operate.
    let (s, v) = api
        .call_as(
            Some(PRODUCE),
            Method::POST,
            "/api/v1/jobs",
            Some(enqueue.clone()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let id = v["id"].as_i64().unwrap();
    assert_eq!(
        api.call_as(Some(PRODUCE), Method::GET, "/api/v1/stats", None)
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    for method in [Method::DELETE, Method::GET] {
        let path = if method == Method::DELETE {
            format!("/api/v1/jobs/{id}")
        } else {
            "/api/v1/jobs/bulk/1".into()
        };
        for token in [PRODUCE, READ] {
            let (s, _) = api.call_as(Some(token), method.clone(), &path, None).await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{method} {path}");
        }
    }
    for path in [
        format!("/api/v1/jobs/{id}/hold"),
        "/api/v1/queues/s/pause".into(),
        "/api/v1/queues/s/redrive".into(),
    ] {
        let body = path.ends_with("redrive").then(|| json!({}));
        let (s, _) = api
            .call_as(Some(PRODUCE), Method::POST, &path, body.clone())
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{path}");
        let (s, _) = api.call_as(Some(READ), Method::POST, &path, body).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{path}");
    }
    let claimed = api
        .call_as(
            Some(PRODUCE),
            Method::POST,
            "/api/v1/queues/s/claim",
            Some(json!({})),
        )
        .await
        .1;
    assert_eq!(claimed["jobs"][0]["id"], id);
    // admin: everything.
    let (s, _) = api
        .call_as(Some(ADMIN), Method::POST, "/api/v1/queues/s/pause", None)
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, log) = api
        .call_as(Some(READ), Method::GET, "/api/v1/audit", None)
        .await;
    let entries = log["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "refused actions are not recorded: {log}");
    assert_eq!(
        (&entries[0]["actor"], &entries[0]["action"]),
        (&json!("ops"), &json!("queue.pause"))
    );
    let (_, v) = api
        .call_as(Some(READ), Method::GET, &format!("/api/v1/jobs/{id}"), None)
        .await;
    assert_eq!(v["state"], "running");
    assert_eq!(api.total_jobs().await, 1, "refused calls changed nothing");
    api.done().await;
}

async fn metrics_and_readiness(engine: Engine) {
    let api = Api::new(engine).await;
    // Without tokens every caller is `local`, an admin, with no header at all.
    let (s, me) = api.call_as(None, Method::GET, "/api/v1/me", None).await;
    assert_eq!(
        (s, me),
        (StatusCode::OK, json!({"name": "local", "scope": "admin"}))
    );
    for i in 0..3 {
        api.ok(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "m", "payload": i})),
        )
        .await;
    }
    api.ok(
        Method::POST,
        "/api/v1/jobs",
        Some(json!({"queue": "m", "payload": 9, "delay": "1h"})),
    )
    .await;
    api.ok(Method::POST, "/api/v1/queues/m/claim", Some(json!({})))
        .await;
    // A queue with no job yet, configured (which creates it) and paused.
    api.ok(
        Method::PATCH,
        "/api/v1/queues/idle",
        Some(json!({"max_attempts": 3})),
    )
    .await;
    api.ok(Method::POST, "/api/v1/queues/idle/pause", None)
        .await;
    let (s, body) = api.get("/metrics").await;
    assert_eq!(s, StatusCode::OK);
    let text = body.as_str().unwrap();
    for line in [
        r#"backlog_jobs{queue="m",state="available"} 2"#,
        r#"backlog_jobs{queue="m",state="running"} 1"#,
        r#"backlog_jobs{queue="m",state="scheduled"} 1"#,
        r#"backlog_queue_paused{queue="idle"} 1"#,
        r#"backlog_queue_paused{queue="m"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    let lag = text
        .lines()
        .find_map(|l| l.strip_prefix(r#"backlog_queue_lag_seconds{queue="m"} "#))
        .expect("a lag for m")
        .parse::<f64>()
        .unwrap();
    assert!((0.0..60.0).contains(&lag), "{lag}");
    // A session idle in a transaction shows, with its pid, where the database keeps rows for it.
    if engine == Engine::Postgres {
        use sqlx::Connection as _;
        let mut c = sqlx::PgConnection::connect(&api.db.url).await.unwrap();
        sqlx::raw_sql("BEGIN; SELECT txid_current();")
            .execute(&mut c)
            .await
            .unwrap();
        let (_, body) = api.get("/metrics").await;
        let text = body.as_str().unwrap();
        assert!(
            text.lines()
                .any(|l| l.starts_with("backlog_db_oldest_transaction_seconds{")
                    && l.contains("pid=")),
            "{text}"
        );
        c.close().await.unwrap();
    }
    let ready = api.ok(Method::GET, "/readyz", None).await;
    assert_eq!(ready["schema_version"], backlog::SCHEMA_VERSION);
    api.done().await;
}

/// Counters and history come from what every process recorded in the database; every admin
/// action lands in the audit log with who did it.
async fn counters_history_and_audit(engine: Engine) {
    let api = Api::new(engine).await;
    let jobs: Vec<Value> = (0..3)
        .map(|i| json!({"queue": "h", "payload": i}))
        .collect();
    api.ok(
        Method::POST,
        "/api/v1/jobs/batch",
        Some(json!({ "jobs": jobs })),
    )
    .await;
    let claimed = api
        .ok(
            Method::POST,
            "/api/v1/queues/h/claim",
            Some(json!({"limit": 3})),
        )
        .await;
    let c = claimed["jobs"].as_array().unwrap();
    let refs: Vec<Value> = c[..2]
        .iter()
        .map(|j| json!({"id": j["id"], "token": j["token"]}))
        .collect();
    api.ok(
        Method::POST,
        "/api/v1/queues/h/complete",
        Some(json!({ "jobs": refs })),
    )
    .await;
    api.ok(
        Method::POST,
        &format!("/api/v1/jobs/{}/fail", c[2]["id"]),
        Some(json!({"token": c[2]["token"], "error": "no", "discard": true})),
    )
    .await;
    api.db.client.flush_stats().await.unwrap();

    let (_, body) = api.get("/metrics").await;
    let text = body.as_str().unwrap();
    for line in [
        r#"backlog_jobs_enqueued_total{queue="h"} 3"#,
        r#"backlog_jobs_started_total{queue="h"} 3"#,
        r#"backlog_jobs_completed_total{queue="h"} 2"#,
        r#"backlog_jobs_failed_total{queue="h"} 1"#,
        r#"backlog_jobs_dead_total{queue="h"} 1"#,
        r#"backlog_jobs_rescued_total{queue="h"} 0"#,
        r#"backlog_job_wait_seconds_count{queue="h"} 3"#,
        r#"backlog_job_wait_seconds_bucket{le="+Inf",queue="h"} 3"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }

    let h = api
        .ok(Method::GET, "/api/v1/history?queue=h&minutes=5", None)
        .await;
    let minutes = h["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 5);
    let sum = |k: &str| minutes.iter().map(|m| m[k].as_i64().unwrap()).sum::<i64>();
    assert_eq!((sum("enqueued"), sum("completed"), sum("dead")), (3, 2, 1));
    assert!(
        minutes
            .windows(2)
            .all(|w| w[1]["minute"].as_i64() > w[0]["minute"].as_i64())
    );
    let all = api.ok(Method::GET, "/api/v1/history", None).await;
    assert_eq!(all["minutes"].as_array().unwrap().len(), 60);
    api.fails(
        Method::GET,
        "/api/v1/history?minutes=0",
        None,
        StatusCode::BAD_REQUEST,
        "value_out_of_range",
    )
    .await;
    api.fails(
        Method::GET,
        "/api/v1/history?queue=a%20b",
        None,
        StatusCode::BAD_REQUEST,
        "queue_name_invalid",
    )
    .await;

    // Admin actions are recorded, newest first, with the actor.
    api.ok(Method::POST, "/api/v1/queues/h/pause", None).await;
    api.ok(
        Method::PATCH,
        "/api/v1/queues/h",
        Some(json!({"max_attempts": 7})),
    )
    .await;
    api.ok(Method::POST, "/api/v1/queues/h/redrive", Some(json!({})))
        .await;
    api.ok(
        Method::POST,
        &format!("/api/v1/jobs/{}/cancel", c[2]["id"]),
        None,
    )
    .await;
    let log = api.ok(Method::GET, "/api/v1/audit?limit=3", None).await;
    let actions: Vec<&str> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        vec!["job.cancel", "queue.redrive", "queue.settings"]
    );
    let e = &log["entries"];
    assert_eq!(
        (&e[0]["actor"], &e[0]["job_id"], &e[0]["queue"]),
        (&json!("local"), &c[2]["id"], &json!("h"))
    );
    assert_eq!(e[1]["detail"]["redriven"], 1);
    assert_eq!(
        e[2]["detail"]["changed"]["max_attempts"],
        json!({"before": 25, "after": 7})
    );
    let older = api
        .ok(
            Method::GET,
            &format!("/api/v1/audit?before={}", log["next"]),
            None,
        )
        .await;
    assert_eq!(older["entries"][0]["action"], "queue.pause");
    assert_eq!(
        api.ok(Method::GET, "/api/v1/audit?queue=other", None).await["entries"],
        json!([])
    );
    api.fails(
        Method::GET,
        "/api/v1/audit?limit=5000",
        None,
        StatusCode::BAD_REQUEST,
        "value_out_of_range",
    )
    .await;
    // By action and by actor.
    let only = |query: &'static str| {
        let api = &api;
        async move {
            let page = api
                .ok(Method::GET, &format!("/api/v1/audit?{query}"), None)
                .await;
            page["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    format!(
                        "{} {}",
                        e["actor"].as_str().unwrap(),
                        e["action"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        only("action=queue.redrive").await,
        vec!["local queue.redrive"]
    );
    assert_eq!(
        only("action=queue.settings&queue=h").await,
        vec!["local queue.settings"]
    );
    assert_eq!(
        only("actor=local&action=job.cancel").await,
        vec!["local job.cancel"]
    );
    assert_eq!(only("actor=nobody").await, Vec::<String>::new());
    // An action that is not one is an error naming those there are, not an empty page.
    let body = api
        .fails(
            Method::GET,
            "/api/v1/audit?action=queue.delete",
            None,
            StatusCode::BAD_REQUEST,
            "option_invalid",
        )
        .await;
    assert!(body.to_string().contains("queue.settings"), "{body}");
    api.fails(
        Method::GET,
        "/api/v1/audit?actor=",
        None,
        StatusCode::BAD_REQUEST,
        "option_invalid",
    )
    .await;
    api.done().await;
}

/// Every route of /openapi.json is served. The router is built from the same list as the
/// document (utoipa-axum), so no served API route can be missing from it; this checks the other
/// way: no documented route is a 404 or 405 of the router itself (an error of ours has a body).
async fn every_documented_route_answers(engine: Engine) {
    let api = Api::new(engine).await;
    let paths = api.spec["paths"].as_object().unwrap().clone();
    let mut calls = 0;
    for (template, item) in &paths {
        let path = template
            .replace("{id}", "1")
            .replace("{queue}", "q")
            .replace("{file}", "app.js");
        for method in item.as_object().unwrap().keys() {
            let m: Method = method.to_uppercase().parse().unwrap();
            let body = (m != Method::GET).then(|| "{}".to_owned());
            let (status, v) = api
                .raw(None, m.clone(), &path, body, "application/json")
                .await;
            assert!(
                !(status == StatusCode::METHOD_NOT_ALLOWED
                    || (status == StatusCode::NOT_FOUND && v.get("error").is_none())),
                "{m} {path}: {status} {v}"
            );
            calls += 1;
        }
    }
    assert!(calls >= 29, "only {calls} operations documented");
    api.done().await;
}

/// Before `backlog migrate`: ready says why not, and the API answers 503, not 500.
async fn unmigrated_database_is_not_ready(engine: Engine) {
    let db = TestDb::new(engine).await;
    let dir = tempfile::tempdir().unwrap();
    let url = match engine {
        Engine::Postgres => format!(
            "{}?options=-c%20search_path%3Dbl_no_such_schema",
            backlog_testdb::pg_base()
        ),
        _ => format!("sqlite://{}", dir.path().join("empty.db").display()),
    };
    let client = Arc::new(Client::connect(&url).await.unwrap());
    let api = Api::with(
        db,
        client,
        ServerConfig::new("127.0.0.1:0".parse().unwrap()),
    );
    api.fails(
        Method::GET,
        "/readyz",
        None,
        StatusCode::SERVICE_UNAVAILABLE,
        "schema_outdated",
    )
    .await;
    api.fails(
        Method::GET,
        "/api/v1/stats",
        None,
        StatusCode::SERVICE_UNAVAILABLE,
        "schema_outdated",
    )
    .await;
    assert_eq!(api.get("/healthz").await.0, StatusCode::OK);
    api.done().await;
}

/// A job enqueued with the caller's W3C trace context (headers) carries it: `job show` and the
/// worker protocol's claim hand it back. A malformed `traceparent` is ignored, not refused.
async fn trace_context_from_headers(engine: Engine) {
    let api = Api::new(engine).await;
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (status, one) = api
        .post_with(
            "/api/v1/jobs",
            json!({"queue": "tr", "payload": 1}),
            &[("traceparent", tp), ("tracestate", "congo=t61rcWkgMzE")],
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{one}");
    let (status, batch) = api
        .post_with(
            "/api/v1/jobs/batch",
            json!({"jobs": [{"queue": "tr", "payload": 2}, {"queue": "tr", "payload": 3}]}),
            &[("traceparent", tp)],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{batch}");
    let (status, bad) = api
        .post_with(
            "/api/v1/jobs",
            json!({"queue": "tr", "payload": 4}),
            &[("traceparent", "00-not-a-trace-01")],
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{bad}");
    let plain = api
        .ok(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "tr", "payload": 5})),
        )
        .await;

    let show = |id: &Value| format!("/api/v1/jobs/{id}");
    let j = api.ok(Method::GET, &show(&one["id"]), None).await;
    assert_eq!(
        (&j["traceparent"], &j["tracestate"]),
        (&json!(tp), &json!("congo=t61rcWkgMzE"))
    );
    for b in batch["jobs"].as_array().unwrap() {
        let j = api.ok(Method::GET, &show(&b["id"]), None).await;
        assert_eq!(
            (&j["traceparent"], &j["tracestate"]),
            (&json!(tp), &Value::Null)
        );
    }
    for id in [&bad["id"], &plain["id"]] {
        let j = api.ok(Method::GET, &show(id), None).await;
        assert_eq!(j["traceparent"], Value::Null);
    }
    let claimed = api
        .ok(
            Method::POST,
            "/api/v1/queues/tr/claim",
            Some(json!({"limit": 10, "lease": "10s", "worker": "w-1"})),
        )
        .await;
    let jobs = claimed["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 5);
    let traced: Vec<&Value> = jobs
        .iter()
        .filter(|j| j["traceparent"] == json!(tp))
        .collect();
    assert_eq!(traced.len(), 3, "{claimed}");
    api.done().await;
}

#[tokio::test]
async fn sqlite_unmigrated_database_is_not_ready() {
    unmigrated_database_is_not_ready(Engine::Sqlite).await;
}

#[cfg(feature = "servers")]
#[tokio::test]
async fn postgres_unmigrated_database_is_not_ready() {
    unmigrated_database_is_not_ready(Engine::Postgres).await;
}

/// Flow control in `/metrics`: the limits, and the groups held up, by why.
async fn flow_control_metrics(engine: Engine) {
    let api = Api::new(engine).await;
    api.ok(
        Method::PATCH,
        "/api/v1/queues/lim",
        Some(json!({"global_concurrency": 4, "rate_limit": "10/1s",
                    "group_concurrency": 2, "group_rate_limit": "1/1h"})),
    )
    .await;
    // Two of the group may be ready at once, but its bucket holds one start an hour: the second
    // is made available, due in an hour, and holds the group up.
    for i in 0..2 {
        api.ok(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "lim", "payload": i, "group": "acct-1"})),
        )
        .await;
    }
    let q = api.ok(Method::GET, "/api/v1/queues/lim", None).await;
    let blocked = &q["flow"]["blocked"];
    assert_eq!(blocked.as_array().map(Vec::len), Some(1), "{q}");
    assert_eq!(
        (&blocked[0]["group"], &blocked[0]["reason"]),
        (&json!("acct-1"), &json!("rate"))
    );
    let (s, body) = api.get("/metrics").await;
    assert_eq!(s, StatusCode::OK);
    let text = body.as_str().unwrap();
    for line in [
        r#"backlog_queue_global_concurrency{queue="lim"} 4"#,
        r#"backlog_queue_rate_limit_per_second{queue="lim",scope="queue"} 10.0"#,
        r#"backlog_queue_groups_blocked{queue="lim",reason="rate"} 1"#,
        r#"backlog_queue_groups_blocked{queue="lim",reason="retry"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    let per_group = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"backlog_queue_rate_limit_per_second{queue="lim",scope="group"} "#)
        })
        .expect("the group rate limit")
        .parse::<f64>()
        .unwrap();
    assert!((per_group - 1.0 / 3600.0).abs() < 1e-9, "{per_group}");
    // A bad group key changes nothing.
    api.fails(
        Method::POST,
        "/api/v1/jobs",
        Some(json!({"queue": "lim", "payload": 3, "group": ""})),
        StatusCode::BAD_REQUEST,
        "group_key_invalid",
    )
    .await;
    let q = api.ok(Method::GET, "/api/v1/queues/lim", None).await;
    assert_eq!(
        q["stats"]["available"].as_i64().unwrap() + q["stats"]["scheduled"].as_i64().unwrap(),
        2,
        "{q}"
    );
}

/// A running worker is listed with its queues, host and process; once stopped it is gone. A
/// registration left by a worker that was killed shows as expired.
async fn workers_are_listed_while_they_run(engine: Engine) {
    let api = Api::new(engine).await;
    assert_eq!(
        api.ok(Method::GET, "/api/v1/workers", None).await,
        json!({"workers": []})
    );
    let worker = backlog::Worker::builder(api.db.client.clone())
        .queue("mail", 3)
        .fallback_handler(|_: backlog::JobContext| async { Ok(backlog::Outcome::Complete) })
        .configure(|c| c.maintenance = None)
        .build()
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let stop = stop.clone();
        async move { worker.run(stop).await }
    });
    let mut listed = json!([]);
    for _ in 0..50 {
        listed = api.ok(Method::GET, "/api/v1/workers", None).await["workers"].clone();
        if listed.as_array().is_some_and(|w| !w.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let w = &listed[0];
    assert_eq!(
        w["queues"],
        json!([{"queue": "mail", "concurrency": 3}]),
        "{listed}"
    );
    assert_eq!(w["pid"], json!(std::process::id()));
    assert_eq!(w["expired"], json!(false));
    assert_eq!(w["version"], json!(env!("CARGO_PKG_VERSION")));
    stop.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(
        api.ok(Method::GET, "/api/v1/workers", None).await,
        json!({"workers": []}),
        "a worker that stops deletes its registration"
    );
    // A worker killed leaves its row, which runs out.
    let now = api.db.client.now();
    api.db
        .client
        .backend()
        .worker_beat(&backlog::WorkerRegistration {
            id: "gone:1:ab".into(),
            host: "gone".into(),
            pid: 1,
            version: "0.1.0".into(),
            queues: "[]".into(),
            running: 2,
            started_at: now - 90_000_000,
            seen_at: now - 60_000_000,
            expires_at: now - 30_000_000,
        })
        .await
        .unwrap();
    let listed = api.ok(Method::GET, "/api/v1/workers", None).await;
    assert_eq!(
        (
            &listed["workers"][0]["id"],
            &listed["workers"][0]["expired"]
        ),
        (&json!("gone:1:ab"), &json!(true))
    );
    api.done().await;
}

/// The periodic schedules as their leader declared them, with their last and next run.
async fn cron_schedules_are_listed(engine: Engine) {
    let api = Api::new(engine).await;
    assert_eq!(
        api.ok(Method::GET, "/api/v1/cron", None).await,
        json!({"schedules": []})
    );
    let b = api.db.client.backend();
    let schedule = |name: &str, kind: Option<&str>| backlog::CronSchedule {
        name: name.into(),
        schedule: Some("0 3 * * *".into()),
        queue: Some("nightly".into()),
        kind: kind.map(str::to_owned),
        last_tick: 0,
        next_tick: Some(1_800_000_000_000_000),
        declared_at: Some(1_700_000_000_000_000),
    };
    b.cron_declare(&[schedule("report", Some("pdf")), schedule("backup", None)])
        .await
        .unwrap();
    let fired = b
        .cron_fire(backlog_core::CronFireParams {
            name: "backup".into(),
            tick: 1_790_000_000_000_000,
            job: api.db.client.new_job("nightly", &json!({})).unwrap(),
            now: api.db.client.now(),
        })
        .await
        .unwrap();
    assert!(fired.is_some());
    let page = api.ok(Method::GET, "/api/v1/cron", None).await;
    let s = &page["schedules"];
    assert_eq!(
        (&s[0]["name"], &s[1]["name"]),
        (&json!("backup"), &json!("report"))
    );
    assert_eq!(s[0]["schedule"], "0 3 * * *");
    assert_eq!(s[0]["queue"], "nightly");
    assert!(
        s[0]["last_run"].as_str().unwrap().starts_with("2026-09-21"),
        "{page}"
    );
    assert!(
        s[0]["next_run"].as_str().unwrap().starts_with("2027-01-15"),
        "{page}"
    );
    assert_eq!(
        (&s[1]["last_run"], &s[1]["kind"]),
        (&json!(null), &json!("pdf"))
    );
    api.done().await;
}

/// `after` and `on_parent_failure` on enqueue (issue 47): the child waits (`deps_left`), is
/// released when its parent completes through the worker protocol, and bad dependencies are
/// refused with the error's code and nothing written.
async fn jobs_that_wait_for_other_jobs(engine: Engine) {
    let api = Api::new(engine).await;
    let (status, parent) = api
        .post("/api/v1/jobs", json!({"queue": "deps", "payload": 1}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{parent}");
    let parent = parent["id"].as_i64().unwrap();
    let (status, child) = api
        .post(
            "/api/v1/jobs",
            json!({"queue": "deps", "payload": 2, "after": [parent], "on_parent_failure": "run"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{child}");
    let child = child["id"].as_i64().unwrap();
    let shown = api
        .ok(Method::GET, &format!("/api/v1/jobs/{child}"), None)
        .await;
    assert_eq!(
        (&shown["state"], &shown["deps_left"]),
        (&json!("waiting"), &json!(1))
    );

    for (body, code) in [
        (
            json!({"queue": "deps", "payload": 3, "after": [987654321]}),
            "parent_not_found",
        ),
        (
            json!({"queue": "deps", "payload": 3, "after": [0]}),
            "dependency_invalid",
        ),
        (
            json!({"queue": "deps", "payload": 3, "after": [parent, parent]}),
            "dependency_invalid",
        ),
        (
            json!({"queue": "deps", "payload": 3, "after": [parent], "on_parent_failure": "maybe"}),
            "option_invalid",
        ),
        (
            json!({"queue": "deps", "payload": 3, "after": [parent], "group": "g"}),
            "dependency_invalid",
        ),
    ] {
        api.fails(
            Method::POST,
            "/api/v1/jobs",
            Some(body),
            StatusCode::BAD_REQUEST,
            code,
        )
        .await;
    }
    // A batch with one bad parent writes none of its jobs.
    api.fails(
        Method::POST,
        "/api/v1/jobs/batch",
        Some(json!({"jobs": [{"queue": "deps", "payload": 4},
                             {"queue": "deps", "payload": 5, "after": [987654321]}]})),
        StatusCode::BAD_REQUEST,
        "parent_not_found",
    )
    .await;
    let listed = api.ok(Method::GET, "/api/v1/jobs?queue=deps", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 2, "{listed}");

    // The parent completed through the worker protocol releases the child.
    let claimed = api
        .ok(
            Method::POST,
            "/api/v1/queues/deps/claim",
            Some(json!({"limit": 10, "lease": "30s"})),
        )
        .await;
    let jobs = claimed["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "only the parent is due: {claimed}");
    let token = jobs[0]["token"].as_str().unwrap();
    api.ok(
        Method::POST,
        &format!("/api/v1/jobs/{parent}/complete"),
        Some(json!({"token": token})),
    )
    .await;
    let shown = api
        .ok(Method::GET, &format!("/api/v1/jobs/{child}"), None)
        .await;
    assert_eq!(
        (&shown["state"], &shown["deps_left"]),
        (&json!("available"), &json!(0))
    );
    api.done().await;
}

per_backend!(
    jobs_that_wait_for_other_jobs,
    cron_schedules_are_listed,
    workers_are_listed_while_they_run,
    flow_control_metrics,
    every_documented_route_answers,
    trace_context_from_headers,
    counters_history_and_audit,
    enqueue_show_list_and_page,
    worker_protocol_is_fenced,
    queue_administration,
    bad_input_changes_nothing,
    tokens_and_scopes,
    the_document_refuses_what_the_server_refuses,
    metrics_and_readiness,
);
