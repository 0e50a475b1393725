//! What the read commands print, as scripts read it: `stats` (text and `--json`) and the JSON
//! shape of every `--json` output, on every engine.

mod common;

use std::process::Stdio;

use common::{Engine, TestDb};

/// Jobs of a queue with `archive` retention leave `backlog_job`; `stats` counts them as archived
/// instead of showing zeros.
fn stats_count_archived_jobs(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&["queue", "set", "arch", "--retention", "archive"]);
    for n in 0..3 {
        db.ok(&["enqueue", "arch", &format!(r#"{{"n":{n}}}"#)]);
    }
    db.ok(&["enqueue", "other", "{}"]);
    let out = db
        .cmd(&["work", "arch", "--drain", "--", "true"])
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats = db.stats();
    assert_eq!(stats["arch"]["archived"], 3, "{stats}");
    assert_eq!(stats["arch"]["completed"], 0, "{stats}");
    assert_eq!(stats["arch"]["available"], 0, "{stats}");
    assert_eq!(stats["other"]["archived"], 0, "{stats}");
    assert_eq!(stats["other"]["available"], 1, "{stats}");
    let one: serde_json::Value =
        serde_json::from_str(&db.ok(&["stats", "arch", "--json"])).unwrap();
    assert_eq!(one, serde_json::json!({"arch": stats["arch"].clone()}));

    let text = db.ok(&["stats", "arch"]);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header.last(), Some(&"ARCHIVED"), "{text}");
    assert_eq!(row.first(), Some(&"arch"), "{text}");
    assert_eq!(row.last(), Some(&"3"), "{text}");
    assert_eq!(header.len(), row.len(), "{text}");
}

#[test]
fn sqlite_stats_count_archived_jobs() {
    stats_count_archived_jobs(Engine::Sqlite);
}

#[cfg(feature = "servers")]
#[test]
fn postgres_stats_count_archived_jobs() {
    stats_count_archived_jobs(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_stats_count_archived_jobs() {
    stats_count_archived_jobs(Engine::MySql);
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// A time field in microseconds and its `_rfc3339` twin name the same instant; both null or
/// neither.
fn assert_time(v: &serde_json::Value, field: &str) {
    let us = &v[field];
    let text = &v[format!("{field}_rfc3339")];
    if us.is_null() {
        assert!(text.is_null(), "{field}: {v}");
        return;
    }
    let us = us
        .as_i64()
        .unwrap_or_else(|| panic!("{field} is not an integer: {v}"));
    let text = text
        .as_str()
        .unwrap_or_else(|| panic!("{field}_rfc3339 is not a string: {v}"));
    assert!(text.ends_with('Z'), "{field}_rfc3339 is not UTC: {text}");
    let t = humantime::parse_rfc3339(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let parsed = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    assert_eq!(parsed, us, "{field} and {field}_rfc3339 differ: {v}");
}

const JOB_TIMES: [&str; 6] = [
    "run_at",
    "lease_expires_at",
    "created_at",
    "attempted_at",
    "finished_at",
    "cancel_requested_at",
];

fn assert_job_times(job: &serde_json::Value) {
    for f in JOB_TIMES {
        assert_time(job, f);
    }
    for e in job["errors"].as_array().unwrap() {
        assert_time(e, "at");
    }
}

/// `job show`, `job list` and `dead list` embed payloads, progress and results as JSON and give
/// every time in microseconds and as RFC 3339; `queue show`, `queue list` and `stats` keep their
/// shapes.
/// The keys docs/cli-json.md gives under the heading that starts with `heading`: every `"key":`
/// of that section's examples.
fn documented_keys(heading: &str) -> std::collections::BTreeSet<String> {
    let doc = include_str!("../../../docs/cli-json.md");
    let start = doc
        .find(&format!("## `{heading}"))
        .unwrap_or_else(|| panic!("docs/cli-json.md has no section {heading}"));
    let section = &doc[start + 3..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut keys = std::collections::BTreeSet::new();
    for part in section.split('"').collect::<Vec<_>>().windows(2) {
        if part[1].starts_with(':') && !part[0].is_empty() && !part[0].contains(char::is_whitespace)
        {
            keys.insert(part[0].to_owned());
        }
    }
    keys
}

/// Every key `value` prints (in its objects and arrays, but not inside a job's own JSON:
/// payload, progress, result) is one docs/cli-json.md gives under `heading`.
fn assert_documented(heading: &str, value: &serde_json::Value) {
    fn walk(v: &serde_json::Value, found: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    found.insert(k.clone());
                    if !["payload", "progress", "result"].contains(&k.as_str()) {
                        walk(v, found);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut found = std::collections::BTreeSet::new();
    walk(value, &mut found);
    let documented = documented_keys(heading);
    let missing: Vec<_> = found.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "`{heading}` prints keys docs/cli-json.md does not give: {missing:?}"
    );
}

fn json_shapes(engine: Engine) {
    let db = TestDb::new(engine);
    let payload = r#"{"to": "a@example.com", "n": [1, 2.5, null], "deep": {"ok": true}}"#;
    let id = db
        .ok(&[
            "enqueue",
            "mail",
            payload,
            "--kind",
            "welcome",
            "--unique-key",
            "k1",
        ])
        .trim()
        .to_owned();
    let shown = json(&db.ok(&["job", "show", &id, "--json"]));
    assert_eq!(shown["payload"], json(payload), "{shown}");
    assert_eq!(shown["id"].to_string(), id);
    assert_eq!(shown["kind"], "welcome");
    assert_eq!(shown["unique_key"], "k1");
    assert_eq!(shown["state"], "available");
    assert_eq!(shown["reported_state"], "available");
    assert!(
        shown["progress"].is_null() && shown["result"].is_null(),
        "{shown}"
    );
    assert!(shown["attempted_at"].is_null(), "{shown}");
    assert!(shown["run_at"].as_i64().unwrap() > 1_600_000_000_000_000);
    assert_job_times(&shown);
    assert_documented("backlog job show", &shown);

    // Payloads that are not objects stay what they are.
    let n = db.ok(&["enqueue", "scalars", "42"]).trim().to_owned();
    let s = db
        .ok(&["enqueue", "scalars", r#""text""#])
        .trim()
        .to_owned();
    assert_eq!(json(&db.ok(&["job", "show", &n, "--json"]))["payload"], 42);
    assert_eq!(
        json(&db.ok(&["job", "show", &s, "--json"]))["payload"],
        "text"
    );

    // Progress and result from a command, and a scheduled job, in `job list`.
    db.ok(&["enqueue", "mail", "{}", "--delay", "1h"]);
    db.ok(&[
        "work",
        "mail",
        "--kind",
        "welcome",
        "--drain",
        "--",
        "sh",
        "-c",
        r#"echo 'backlog:progress {"done": 50}'; echo 'backlog:result {"rows": [3]}'"#,
    ]);
    let list = json(&db.ok(&["job", "list", "mail", "--json"]));
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    let done = &list[0];
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["payload"], json(payload));
    assert_eq!(done["progress"], serde_json::json!({"done": 50}), "{done}");
    assert_eq!(done["result"], serde_json::json!({"rows": [3]}), "{done}");
    assert!(done["attempted_at"].is_i64() && done["finished_at"].is_i64());
    assert_job_times(done);
    let later = &list[1];
    assert_eq!(
        (&later["state"], &later["reported_state"]),
        (&json(r#""available""#), &json(r#""scheduled""#)),
        "{later}"
    );
    assert_eq!(later["payload"], serde_json::json!({}));
    assert_job_times(later);
    assert_documented("backlog job list", &serde_json::Value::Array(list.clone()));
    let scheduled = json(&db.ok(&["job", "list", "mail", "--state", "scheduled", "--json"]));
    assert_eq!(scheduled.as_array().unwrap().len(), 1, "{scheduled}");

    // A dead job's error history in `dead list`.
    db.ok(&["queue", "set", "fragile", "--max-attempts", "1"]);
    let dead_id = db
        .ok(&["enqueue", "fragile", r#"{"x": 1}"#])
        .trim()
        .to_owned();
    db.ok(&[
        "work",
        "fragile",
        "--drain",
        "--",
        "sh",
        "-c",
        "echo bad >&2; exit 2",
    ]);
    let dead = json(&db.ok(&["dead", "list", "fragile", "--json"]));
    let dead = dead.as_array().unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["id"].to_string(), dead_id);
    assert_eq!(dead[0]["state"], "dead");
    assert_eq!(dead[0]["payload"], serde_json::json!({"x": 1}));
    let errors = dead[0]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["attempt"], 1);
    assert!(errors[0]["error"].as_str().unwrap().contains("bad"));
    assert_job_times(&dead[0]);
    assert_documented("backlog dead list", &serde_json::Value::Array(dead.clone()));
    assert_eq!(
        json(&db.ok(&["dead", "list", "mail", "--json"])),
        json("[]")
    );

    // Queue settings: durations as strings, no times.
    let q = json(&db.ok(&["queue", "show", "fragile", "--json"]));
    assert_eq!(
        q,
        serde_json::json!({
            "name": "fragile", "paused": false, "max_attempts": 1, "backoff_base": "1s",
            "backoff_max": "1h", "lease": "30s", "order": "fifo", "retention": "keep",
            "concurrency": null, "global_concurrency": null, "group_concurrency": 1,
            "group_on_failure": "block", "rate_limit": null, "group_rate_limit": null,
            "shards": 1,
            "flow": {"running": 0, "waiting": 0, "waiting_groups": 0, "blocked": []}
        })
    );
    assert_documented("backlog queue show", &q);
    let queues = json(&db.ok(&["queue", "list", "--json"]));
    assert_documented("backlog queue list", &queues);
    let fragile = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "fragile")
        .unwrap_or_else(|| panic!("{queues}"));
    let mut with_pending = q.clone();
    with_pending["pending"] = 0.into();
    with_pending.as_object_mut().unwrap().remove("flow");
    assert_eq!(*fragile, with_pending);

    // Stats: one object per queue with a count per state and the archived count.
    let stats = db.stats();
    let keys: Vec<&str> = stats["mail"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = [
        "available",
        "scheduled",
        "retrying",
        "running",
        "completed",
        "dead",
        "cancelled",
        "held",
        "waiting",
        "archived",
    ];
    expected.sort_unstable();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(keys, expected);
    assert_eq!(stats["mail"]["scheduled"], 1, "{stats}");
    // Queue names are the keys of `stats`' object; what each holds is the contract.
    for counts in stats.as_object().unwrap().values() {
        assert_documented("backlog stats", counts);
    }
    assert_eq!(stats["fragile"]["dead"], 1, "{stats}");

    // `workers` and `cron`, with a registration and a schedule written as a worker and its
    // leader write them.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let lib = backlog::Client::connect(&db.url).await.unwrap();
        let now = lib.now();
        let b = lib.backend();
        b.worker_beat(&backlog::WorkerRegistration {
            id: "box-1:4242:9f1c22d0".into(),
            host: "box-1".into(),
            pid: 4242,
            version: "0.1.0".into(),
            queues: r#"[{"queue": "emails", "concurrency": 10}]"#.into(),
            running: 3,
            started_at: now,
            seen_at: now,
            expires_at: now + 30_000_000,
        })
        .await
        .unwrap();
        b.cron_declare(&[backlog::CronSchedule {
            name: "nightly-report".into(),
            schedule: Some("0 3 * * *".into()),
            queue: Some("reports".into()),
            kind: Some("pdf".into()),
            last_tick: 0,
            next_tick: Some(now + 3_600_000_000),
            declared_at: Some(now),
        }])
        .await
        .unwrap();
        lib.close().await;
    });
    let workers: serde_json::Value = serde_json::from_str(&db.ok(&["workers", "--json"])).unwrap();
    assert_eq!(workers[0]["queues"][0]["concurrency"], 10, "{workers}");
    assert_eq!(workers[0]["expired"], false);
    assert_documented("backlog workers", &workers);
    let cron: serde_json::Value = serde_json::from_str(&db.ok(&["cron", "--json"])).unwrap();
    assert_eq!(
        (&cron[0]["schedule"], &cron[0]["last_run"]),
        (&serde_json::json!("0 3 * * *"), &serde_json::Value::Null),
        "{cron}"
    );
    assert_documented("backlog cron", &cron);
}

#[test]
fn sqlite_json_shapes() {
    json_shapes(Engine::Sqlite);
}

#[cfg(feature = "servers")]
#[test]
fn postgres_json_shapes() {
    json_shapes(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_json_shapes() {
    json_shapes(Engine::MySql);
}
