//! Enqueue: defaults, batches in input order, unique keys (also under concurrent producers), the trace context, and migrations.

use super::*;

pub(crate) async fn migrate_is_idempotent_and_concurrent(db: Db) {
    let mut handles = vec![];
    for _ in 0..4 {
        let b = db.connect_again().await;
        handles.push(tokio::spawn(async move {
            let r = b.migrate().await.unwrap();
            b.close().await;
            r
        }));
    }
    for h in handles {
        assert_eq!(h.await.unwrap().current, backlog_sql::SCHEMA_VERSION);
    }
    let again = db.b.migrate().await.unwrap();
    assert!(
        again.applied.is_empty(),
        "second migrate applied {:?}",
        again.applied
    );
}

pub(crate) async fn enqueue_defaults_and_claim(db: Db) {
    let now = db.now;
    let out = enqueue(&db, vec![job("mail", r#"{"to":"a@example.com"}"#)], now).await;
    assert!(out[0].created);
    let j = db.b.job_get(out[0].id).await.unwrap().unwrap();
    assert_eq!(j.state, JobState::Available);
    assert_eq!((j.attempt, j.priority, j.max_attempts), (0, 0, None));
    assert_eq!(j.run_at, now);
    assert!(j.errors.is_empty());
    let got =
        db.b.job_claim(&claim("mail", 10, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(got.len(), 1);
    let c = &got[0];
    assert_eq!((c.id, c.attempt, c.queue.as_str()), (out[0].id, 1, "mail"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&c.payload).unwrap()["to"],
        "a@example.com"
    );
    assert_eq!(c.lease_expires_at, now + 30 * SEC);
    let j = db.b.job_get(c.id).await.unwrap().unwrap();
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.lease_token, Some(c.lease_token));
    assert_eq!(j.lease_owner.as_deref(), Some("test-worker"));
    // Nothing else to claim.
    assert!(
        db.b.job_claim(&claim("mail", 10, now, db.strategy()))
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn batch_enqueue_keeps_input_order(db: Db) {
    let jobs: Vec<NewJob> = (0..2500)
        .map(|i| job("bulk", &format!(r#"{{"i":{i}}}"#)))
        .collect();
    let out = enqueue(&db, jobs, db.now).await;
    assert_eq!(out.len(), 2500);
    assert!(out.iter().all(|o| o.created));
    assert!(
        out.windows(2).all(|w| w[0].id < w[1].id),
        "ids not ascending"
    );
    for i in [0usize, 999, 1000, 2499] {
        let j = db.b.job_get(out[i].id).await.unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(&j.payload).unwrap();
        assert_eq!(v["i"], i, "row {i} got the wrong id");
    }
    // Rows that differ beyond their payload (kinds, priorities, queues) take the general
    // statement, in chunks too.
    let mixed: Vec<NewJob> = (0..1500)
        .map(|i| {
            let mut j = job(["bulk", "bulk2"][i % 2], &format!(r#"{{"i":{i}}}"#));
            j.priority = (i % 3) as i16;
            j.kind = (i % 5 == 0).then(|| Kind::new("k").unwrap());
            j
        })
        .collect();
    let out = enqueue(&db, mixed, db.now).await;
    assert_eq!(out.len(), 1500);
    assert!(out.windows(2).all(|w| w[0].id < w[1].id));
    for i in [0usize, 1, 5, 999, 1000, 1499] {
        let j = db.b.job_get(out[i].id).await.unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(&j.payload).unwrap();
        assert_eq!(v["i"], i, "row {i} got the wrong id");
        assert_eq!(j.priority, (i % 3) as i16);
        assert_eq!(j.queue, ["bulk", "bulk2"][i % 2]);
        assert_eq!(j.kind.is_some(), i % 5 == 0);
    }
}

pub(crate) async fn unique_keys(db: Db) {
    let now = db.now;
    let a = enqueue(&db, vec![keyed("u", "k1")], now).await[0];
    assert!(a.created);
    let again = enqueue(&db, vec![keyed("u", "k1")], now).await[0];
    assert_eq!(
        again,
        EnqueueOutcome {
            id: a.id,
            created: false
        }
    );
    // Inside one batch: duplicates fold into one job, existing keys return the existing id.
    let out = enqueue(
        &db,
        vec![
            keyed("u", "k1"),
            keyed("u", "k2"),
            job("u", "{}"),
            keyed("u", "k2"),
        ],
        now,
    )
    .await;
    assert_eq!(
        out[0],
        EnqueueOutcome {
            id: a.id,
            created: false
        }
    );
    assert!(out[1].created && out[2].created);
    assert_eq!(
        out[3],
        EnqueueOutcome {
            id: out[1].id,
            created: false
        }
    );
    // The same key in another queue is another job.
    assert!(enqueue(&db, vec![keyed("other", "k1")], now).await[0].created);
    // Once the job is finished the key is free again.
    let c =
        db.b.job_claim(&claim("u", 1, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(c[0].id, a.id);
    complete(&db, vec![c[0].job_ref()], now, Retention::Keep).await;
    let fresh = enqueue(&db, vec![keyed("u", "k1")], now).await[0];
    assert!(fresh.created && fresh.id != a.id);
}

pub(crate) async fn unique_keys_under_concurrent_producers(db: Db) {
    let mut handles = vec![];
    for _ in 0..16 {
        let b = db.b.clone();
        let now = db.now;
        handles.push(tokio::spawn(async move {
            b.job_insert(JobInsertParams {
                jobs: vec![keyed("race", "same"), keyed("race", "k-other")],
                now,
            })
            .await
            .unwrap()
        }));
    }
    let mut outs = vec![];
    for h in handles {
        outs.push(h.await.unwrap());
    }
    for slot in 0..2 {
        let ids: HashSet<i64> = outs.iter().map(|o| o[slot].id).collect();
        assert_eq!(ids.len(), 1, "two jobs for one key: {ids:?}");
        assert_eq!(outs.iter().filter(|o| o[slot].created).count(), 1);
    }
    let stats = db.b.queue_stats(Some(&q("race")), db.now).await.unwrap();
    assert_eq!(stats[0].1.available, 2);
}

pub(crate) fn traced(queue: &str, n: u8) -> NewJob {
    let mut j = job(queue, "{}");
    j.trace_context = Some(
        TraceContext::new(
            &format!("00-4bf92f3577b34da6a3ce929d0e0e47{n:02x}-00f067aa0ba902{n:02x}-01"),
            n.is_multiple_of(2).then_some("congo=t61rcWkgMzE"),
        )
        .unwrap(),
    );
    j
}

/// A job's W3C trace context goes in through every insert path (one job, a uniform batch, a
/// mixed batch, a unique key) and comes back from every claim path (each strategy, and a claim
/// that follows a completion) and from `job_get`, the archive too.
pub(crate) async fn trace_context_travels_with_the_job(db: Db) {
    let now = db.now;
    for strategy in db.strategies() {
        let qn = format!("tc-{}", harness::strategy_name(strategy));
        let mut batches = vec![vec![traced(&qn, 1)]];
        // A batch that differs only in payload: one trace context for all.
        batches.push((0..3).map(|_| traced(&qn, 2)).collect());
        // A batch of different contexts, and one without.
        batches.push(vec![traced(&qn, 3), job(&qn, "{}"), traced(&qn, 4)]);
        let mut k = traced(&qn, 5);
        k.unique_key = Some(UniqueKey::new(format!("{qn}-k")).unwrap());
        batches.push(vec![k]);
        let mut want = std::collections::HashMap::new();
        for b in batches {
            let out = enqueue(&db, b.clone(), now).await;
            for (o, j) in out.iter().zip(&b) {
                assert!(o.created);
                want.insert(o.id, j.trace_context.clone());
            }
        }
        for (&id, tc) in &want {
            assert_eq!(&db.b.job_get(id).await.unwrap().unwrap().trace_context, tc);
        }
        let first = db.b.job_claim(&claim(&qn, 4, now, strategy)).await.unwrap();
        let r =
            db.b.job_complete_claim(JobCompleteClaimParams {
                complete: JobCompleteParams {
                    jobs: first.iter().map(|c| c.job_ref()).collect(),
                    now: now + 1,
                    retention: Retention::Archive,
                },
                claim: claim(&qn, 10, now + 1, strategy),
                expect_jobs: true,
                groups: vec![],
            })
            .await
            .unwrap();
        let rest = r.claimed.unwrap();
        assert_eq!(first.len() + rest.len(), want.len(), "{strategy:?}");
        for c in first.iter().chain(&rest) {
            assert_eq!(&c.trace_context, &want[&c.id], "{strategy:?} job {}", c.id);
        }
        // Archived on completion, and still carrying it.
        for c in &first {
            assert_eq!(db.archived(c.id).await, Some("completed".to_string()));
            let j = db.b.job_get(c.id).await.unwrap().unwrap();
            assert_eq!(&j.trace_context, &want[&c.id]);
        }
    }
}
