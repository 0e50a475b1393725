#![allow(missing_docs)]
//! The conformance suite: every operation and state transition of the backend seam, written once
//! and run against SQLite, PostgreSQL, MariaDB/MySQL and the in-memory backend. PostgreSQL and
//! MySQL are required: a database that cannot be reached fails these tests, it never skips them.

// The SQLite and in-memory tier leaves the servers' helpers unused.
#[cfg_attr(not(feature = "servers"), allow(dead_code))]
mod harness;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use backlog_core::*;
use harness::Db;

const SEC: i64 = 1_000_000;

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn job(queue: &str, payload: &str) -> NewJob {
    NewJob::new(
        q(queue),
        Payload::parse(payload, DEFAULT_PAYLOAD_LIMIT).unwrap(),
    )
}

fn keyed(queue: &str, key: &str) -> NewJob {
    let mut j = job(queue, "{}");
    j.unique_key = Some(UniqueKey::new(key).unwrap());
    j
}

fn claim(queue: &str, limit: u32, now: i64, strategy: ClaimStrategy) -> JobClaimParams {
    JobClaimParams {
        queue: q(queue),
        kinds: vec![],
        limit,
        owner: "test-worker".into(),
        lease: Duration::from_secs(30),
        now,
        order: Ordering::Fifo,
        strategy,
        global_limit: false,
    }
}

async fn enqueue(db: &Db, jobs: Vec<NewJob>, now: i64) -> Vec<EnqueueOutcome> {
    db.b.job_insert(JobInsertParams { jobs, now })
        .await
        .unwrap()
}

async fn ids(db: &Db, jobs: Vec<NewJob>, now: i64) -> Vec<i64> {
    enqueue(db, jobs, now)
        .await
        .into_iter()
        .map(|o| o.id)
        .collect()
}

async fn state_of(db: &Db, id: i64) -> JobState {
    db.b.job_get(id).await.unwrap().expect("job exists").state
}

async fn complete(db: &Db, refs: Vec<JobRef>, now: i64, retention: Retention) -> Vec<JobRef> {
    db.b.job_complete(JobCompleteParams {
        jobs: refs,
        now,
        retention,
    })
    .await
    .unwrap()
}

/// Jobs of the queues left to do, of any kind and whenever due.
async fn pending(db: &Db, queues: &[&str]) -> i64 {
    db.b.job_count_pending(&JobCountPendingParams {
        queues: queues.iter().map(|n| q(n)).collect(),
        kinds: vec![],
        due_by: None,
    })
    .await
    .unwrap()
}

async fn migrate_is_idempotent_and_concurrent(db: Db) {
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

async fn enqueue_defaults_and_claim(db: Db) {
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

async fn batch_enqueue_keeps_input_order(db: Db) {
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

async fn unique_keys(db: Db) {
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

async fn unique_keys_under_concurrent_producers(db: Db) {
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

async fn fifo_lifo_and_priority(db: Db) {
    for strategy in db.strategies() {
        let now = db.now;
        let qn = format!("order-{}", harness::strategy_name(strategy));
        let mut jobs = vec![];
        for (i, pr) in [5i16, 0, 5, 0].into_iter().enumerate() {
            let mut j = job(&qn, &format!(r#"{{"i":{i}}}"#));
            j.priority = pr;
            j.run_at = Some(now - 10 * SEC + i as i64); // distinct due times, in input order
            jobs.push(j);
        }
        let id = ids(&db, jobs, now).await;
        let mut got = vec![];
        for _ in 0..4 {
            got.push(db.b.job_claim(&claim(&qn, 1, now, strategy)).await.unwrap()[0].id);
        }
        assert_eq!(
            got,
            vec![id[1], id[3], id[0], id[2]],
            "fifo by priority ({strategy:?})"
        );

        let lq = format!("lifo-{}", harness::strategy_name(strategy));
        let mut s = QueueSettings::defaults(q(&lq));
        s.order = Ordering::Lifo;
        db.b.queue_upsert(&s, now).await.unwrap();
        assert_eq!(
            db.b.queue_get(&q(&lq)).await.unwrap().unwrap().order,
            Ordering::Lifo
        );
        let id = ids(
            &db,
            (0..3)
                .map(|i| {
                    let mut j = job(&lq, "{}");
                    j.run_at = Some(now - 10 * SEC + i);
                    j
                })
                .collect(),
            now,
        )
        .await;
        let mut p = claim(&lq, 3, now, strategy);
        p.order = Ordering::Lifo;
        let first = db.b.job_claim(&p).await.unwrap();
        let got: Vec<i64> = first.iter().map(|c| c.id).collect();
        assert_eq!(got, vec![id[2], id[1], id[0]], "lifo ({strategy:?})");
        // The same order when the claim comes with a completion of the jobs before it.
        let later = ids(
            &db,
            (0..3)
                .map(|i| {
                    let mut j = job(&lq, "{}");
                    j.run_at = Some(now - 5 * SEC + i);
                    j
                })
                .collect(),
            now,
        )
        .await;
        let refs: Vec<JobRef> = first.iter().map(|c| c.job_ref()).collect();
        p.limit = 2;
        let r =
            db.b.job_complete_claim(JobCompleteClaimParams {
                complete: JobCompleteParams {
                    jobs: refs,
                    now,
                    retention: Retention::Delete,
                },
                claim: p,
                expect_jobs: true,
                groups: vec![],
            })
            .await
            .unwrap();
        assert_eq!(
            r.completed.len(),
            3,
            "lifo complete and claim ({strategy:?})"
        );
        let next: Vec<i64> = r.claimed.unwrap().iter().map(|c| c.id).collect();
        assert_eq!(
            next,
            vec![later[2], later[1]],
            "lifo complete and claim ({strategy:?})"
        );
    }
}

async fn delayed_jobs_wait_for_run_at(db: Db) {
    let now = db.now;
    let mut j = job("later", "{}");
    j.run_at = Some(now + 60 * SEC);
    let id = ids(&db, vec![j], now).await[0];
    for strategy in db.strategies() {
        assert!(
            db.b.job_claim(&claim("later", 5, now, strategy))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            db.b.job_claim(&claim("later", 5, now + 60 * SEC - 1, strategy))
                .await
                .unwrap()
                .is_empty()
        );
    }
    let stats = db.b.queue_stats(Some(&q("later")), now).await.unwrap();
    assert_eq!((stats[0].1.scheduled, stats[0].1.available), (1, 0));
    let got =
        db.b.job_claim(&claim("later", 5, now + 60 * SEC, db.strategy()))
            .await
            .unwrap();
    assert_eq!(got[0].id, id);
}

async fn paused_queues_hand_out_nothing(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("p", "{}")], now).await[0];
    db.b.queue_set_paused(&q("p"), true, now).await.unwrap();
    for strategy in db.strategies() {
        assert!(
            db.b.job_claim(&claim("p", 5, now, strategy))
                .await
                .unwrap()
                .is_empty()
        );
    }
    assert!(db.b.queue_get(&q("p")).await.unwrap().unwrap().paused);
    db.b.queue_set_paused(&q("p"), false, now).await.unwrap();
    assert_eq!(
        db.b.job_claim(&claim("p", 5, now, db.strategy()))
            .await
            .unwrap()[0]
            .id,
        id
    );
}

async fn kinds_filter_claims(db: Db) {
    let now = db.now;
    let mut a = job("k", "{}");
    a.kind = Some(Kind::new("email").unwrap());
    let mut b = job("k", "{}");
    b.kind = Some(Kind::new("sms").unwrap());
    let id = ids(&db, vec![a, b, job("k", "{}")], now).await;
    for strategy in db.strategies() {
        let mut p = claim("k", 10, now, strategy);
        p.kinds = vec![Kind::new("sms").unwrap(), Kind::new("fax").unwrap()];
        let got = db.b.job_claim(&p).await.unwrap();
        if !got.is_empty() {
            assert_eq!(got.len(), 1);
            assert_eq!((got[0].id, got[0].kind.as_deref()), (id[1], Some("sms")));
            db.b.job_release(JobReleaseParams {
                job: got[0].job_ref(),
                now,
                run_at: now,
            })
            .await
            .unwrap();
        } else {
            panic!("kind filter found nothing ({strategy:?})");
        }
    }
    let all =
        db.b.job_claim(&claim("k", 10, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(all.len(), 3);
}

async fn pending_counts_by_kind_and_due_time(db: Db) {
    let now = db.now;
    let kind = |k: &str| Kind::new(k).unwrap();
    let of = |k: Option<&str>, run_at: i64| {
        let mut j = job("pk", "{}");
        j.kind = k.map(kind);
        j.run_at = Some(run_at);
        j
    };
    let later = now + 100 * SEC;
    ids(
        &db,
        vec![
            of(Some("a"), now),
            of(Some("b"), now),
            of(Some("b"), later),
            of(None, now),
            of(Some("c"), now),
        ],
        now,
    )
    .await;
    // The "c" job runs; the others wait.
    let mut p = claim("pk", 1, now, db.strategy());
    p.kinds = vec![kind("c")];
    assert_eq!(db.b.job_claim(&p).await.unwrap().len(), 1);
    let count = |queues: &[&str], kinds: &[&str], due_by: Option<i64>| {
        let params = JobCountPendingParams {
            queues: queues.iter().map(|n| q(n)).collect(),
            kinds: kinds.iter().map(|k| kind(k)).collect(),
            due_by,
        };
        let b = db.b.clone();
        async move { b.job_count_pending(&params).await.unwrap() }
    };
    assert_eq!(count(&["pk"], &[], None).await, 5);
    assert_eq!(count(&["pk"], &[], Some(now)).await, 4, "not yet due");
    // A worker of kind "a" has one job left although four others wait in its queue.
    assert_eq!(count(&["pk"], &["a"], None).await, 1);
    assert_eq!(count(&["pk"], &["b"], None).await, 2);
    assert_eq!(count(&["pk"], &["b"], Some(now)).await, 1);
    assert_eq!(
        count(&["pk"], &["a", "b", "c"], None).await,
        4,
        "running counts"
    );
    assert_eq!(count(&["pk"], &["zzz"], None).await, 0);
    assert_eq!(count(&["other"], &["a"], None).await, 0);
    assert_eq!(count(&[], &[], None).await, 0);
}

async fn completion_retention(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("r", "1"), job("r", "2"), job("r", "3")], now).await;
    let c =
        db.b.job_claim(&claim("r", 3, now, db.strategy()))
            .await
            .unwrap();
    let by_id = |i: i64| c.iter().find(|x| x.id == i).unwrap().job_ref();
    assert_eq!(
        complete(&db, vec![by_id(id[0])], now + 1, Retention::Delete)
            .await
            .len(),
        1
    );
    assert!(db.b.job_get(id[0]).await.unwrap().is_none());
    assert_eq!(
        complete(&db, vec![by_id(id[1])], now + 2, Retention::Keep)
            .await
            .len(),
        1
    );
    let kept = db.b.job_get(id[1]).await.unwrap().unwrap();
    assert_eq!(
        (kept.state, kept.finished_at, kept.lease_token),
        (JobState::Completed, Some(now + 2), None)
    );
    assert_eq!(
        complete(&db, vec![by_id(id[2])], now + 3, Retention::Archive)
            .await
            .len(),
        1
    );
    // Moved out of the hot table; `job_get` still finds it in the archive.
    assert_eq!(db.archived(id[2]).await, Some("completed".to_string()));
    assert_eq!(state_of(&db, id[2]).await, JobState::Completed);
    assert_eq!(pending(&db, &["r"]).await, 0);
    // A completed job is never handed out again.
    assert!(
        db.b.job_claim(&claim("r", 3, now + 10 * SEC, db.strategy()))
            .await
            .unwrap()
            .is_empty()
    );
    // Completing twice changes nothing.
    assert!(
        complete(&db, vec![by_id(id[1])], now + 4, Retention::Keep)
            .await
            .is_empty()
    );
}

/// Every retention, each with the hint that the claim will find jobs and without it (a backend
/// may take another statement for each; the outcome must be the same).
fn retentions_and_hints() -> Vec<(Retention, bool)> {
    [Retention::Delete, Retention::Keep, Retention::Archive]
        .into_iter()
        .flat_map(|r| [(r, false), (r, true)])
        .collect()
}

async fn complete_claim_completes_then_claims(db: Db) {
    let now = db.now;
    for strategy in db.strategies() {
        for (retention, expect_jobs) in retentions_and_hints() {
            let qn = format!(
                "cc-{}-{retention:?}-{expect_jobs}",
                harness::strategy_name(strategy)
            );
            let id = ids(&db, (0..7).map(|i| job(&qn, &i.to_string())).collect(), now).await;
            let first = db.b.job_claim(&claim(&qn, 3, now, strategy)).await.unwrap();
            assert_eq!(first.iter().map(|c| c.id).collect::<Vec<_>>(), id[..3]);
            // The three finished jobs, and a stale lease of the first one, which must not count.
            let mut refs: Vec<JobRef> = first.iter().map(|c| c.job_ref()).collect();
            let stale = JobRef {
                id: id[3],
                token: 12345,
            };
            refs.push(stale);
            let r =
                db.b.job_complete_claim(JobCompleteClaimParams {
                    complete: JobCompleteParams {
                        jobs: refs,
                        now: now + 1,
                        retention,
                    },
                    claim: claim(&qn, 3, now + 1, strategy),
                    expect_jobs,
                    groups: vec![],
                })
                .await
                .unwrap();
            let mut done: Vec<i64> = r.completed.iter().map(|j| j.id).collect();
            done.sort_unstable();
            assert_eq!(done, id[..3], "{strategy:?} {retention:?} {expect_jobs}");
            let next = r.claimed.unwrap();
            assert_eq!(
                next.iter().map(|c| c.id).collect::<Vec<_>>(),
                id[3..6],
                "{strategy:?} {retention:?} {expect_jobs}: the next jobs in order"
            );
            assert!(next.iter().all(|c| c.attempt == 1 && c.lease_token != 0));
            for &i in &id[..3] {
                match retention {
                    Retention::Delete => assert!(db.b.job_get(i).await.unwrap().is_none()),
                    Retention::Keep => {
                        let j = db.b.job_get(i).await.unwrap().unwrap();
                        assert_eq!(
                            (j.state, j.finished_at),
                            (JobState::Completed, Some(now + 1))
                        );
                    }
                    Retention::Archive => {
                        assert_eq!(db.archived(i).await, Some("completed".to_string()))
                    }
                }
            }
            // The stale token changed nothing: the job is running under its new lease.
            assert_eq!(state_of(&db, id[3]).await, JobState::Running);
            // Nothing to complete: a plain claim. A paused queue: completions, but no claim.
            let r =
                db.b.job_complete_claim(JobCompleteClaimParams {
                    complete: JobCompleteParams {
                        jobs: vec![],
                        now: now + 2,
                        retention,
                    },
                    claim: claim(&qn, 5, now + 2, strategy),
                    expect_jobs,
                    groups: vec![],
                })
                .await
                .unwrap();
            assert!(r.completed.is_empty());
            let last = r.claimed.unwrap();
            assert_eq!(last.iter().map(|c| c.id).collect::<Vec<_>>(), id[6..]);
            db.b.queue_set_paused(&q(&qn), true, now).await.unwrap();
            let mut refs: Vec<JobRef> = next.iter().map(|c| c.job_ref()).collect();
            refs.extend(last.iter().map(|c| c.job_ref()));
            enqueue(&db, vec![job(&qn, "8")], now).await;
            let r =
                db.b.job_complete_claim(JobCompleteClaimParams {
                    complete: JobCompleteParams {
                        jobs: refs,
                        now: now + 3,
                        retention,
                    },
                    claim: claim(&qn, 5, now + 3, strategy),
                    expect_jobs,
                    groups: vec![],
                })
                .await
                .unwrap();
            assert_eq!(
                r.completed.len(),
                4,
                "{strategy:?} {retention:?} {expect_jobs}"
            );
            assert!(
                r.claimed.unwrap().is_empty(),
                "a paused queue hands out nothing"
            );
            assert_eq!(pending(&db, &[&qn]).await, 1);
        }
    }
}

/// The jobs of one claim share its token, and a completion of them alone compares each row with
/// that one token (the PostgreSQL statement takes a cheaper form then): a job among them whose
/// lease was lost, and which runs again under a new claim, is still left alone, by the plain
/// completion and by complete-and-claim.
async fn one_claims_batch_is_fenced_job_by_job(db: Db) {
    let now = db.now;
    for strategy in db.strategies() {
        for (retention, expect_jobs) in retentions_and_hints() {
            let qn = format!(
                "one-{}-{retention:?}-{expect_jobs}",
                harness::strategy_name(strategy)
            );
            let id = ids(&db, (0..6).map(|i| job(&qn, &i.to_string())).collect(), now).await;
            let first = db.b.job_claim(&claim(&qn, 4, now, strategy)).await.unwrap();
            let refs: Vec<JobRef> = first.iter().map(|c| c.job_ref()).collect();
            assert!(
                refs.iter().all(|r| r.token == refs[0].token),
                "one claim, one token"
            );
            // Job 0's attempt fails, with a retry due before the others, and the next claim
            // takes it: it runs again, under a new token.
            db.b.job_fail(JobFailParams {
                job: refs[0],
                now: now + 1,
                error: "x".into(),
                cancelled: false,
                retry_at: Some(now - SEC),
            })
            .await
            .unwrap();
            let again =
                db.b.job_claim(&claim(&qn, 1, now + 1, strategy))
                    .await
                    .unwrap();
            assert_eq!((again[0].id, again[0].attempt), (id[0], 2));
            let done = complete(&db, refs[..2].to_vec(), now + 2, retention).await;
            assert_eq!(
                done,
                vec![refs[1]],
                "{strategy:?} {retention:?} {expect_jobs}: plain completion"
            );
            let r =
                db.b.job_complete_claim(JobCompleteClaimParams {
                    complete: JobCompleteParams {
                        jobs: vec![refs[0], refs[2], refs[3]],
                        now: now + 3,
                        retention,
                    },
                    claim: claim(&qn, 5, now + 3, strategy),
                    expect_jobs,
                    groups: vec![],
                })
                .await
                .unwrap();
            let mut done: Vec<i64> = r.completed.iter().map(|j| j.id).collect();
            done.sort_unstable();
            assert_eq!(
                done,
                id[2..4],
                "{strategy:?} {retention:?} {expect_jobs}: complete and claim"
            );
            let next: Vec<i64> = r.claimed.unwrap().iter().map(|c| c.id).collect();
            assert_eq!(next, id[4..], "{strategy:?} {retention:?} {expect_jobs}");
            let j = db.b.job_get(id[0]).await.unwrap().unwrap();
            assert_eq!(
                (j.state, j.lease_token),
                (JobState::Running, Some(again[0].lease_token)),
                "{strategy:?} {retention:?} {expect_jobs}: the new attempt is untouched"
            );
        }
    }
}

async fn fencing_after_lease_takeover(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("f", "{}")], now).await[0];
    let mut p = claim("f", 1, now, db.strategy());
    p.lease = Duration::from_secs(1);
    let old = db.b.job_claim(&p).await.unwrap()[0].job_ref();
    // Not expired yet: nothing to rescue.
    assert_eq!(
        db.b.job_rescue(JobRescueParams {
            now: now + SEC / 2,
            limit: 100
        })
        .await
        .unwrap()
        .len(),
        0
    );
    let later = now + 2 * SEC;
    assert_eq!(
        db.b.job_rescue(JobRescueParams {
            now: later,
            limit: 100
        })
        .await
        .unwrap()
        .len(),
        1
    );
    let rescued = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!((rescued.state, rescued.attempt), (JobState::Available, 1));
    assert!(
        rescued.errors[0].error.contains("lease expired"),
        "{:?}",
        rescued.errors
    );
    let new =
        db.b.job_claim(&claim("f", 1, later, db.strategy()))
            .await
            .unwrap()[0]
            .clone();
    assert_eq!((new.id, new.attempt), (id, 2));
    assert_ne!(new.lease_token, old.token);
    // The old holder can do nothing.
    assert!(
        complete(&db, vec![old], later, Retention::Keep)
            .await
            .is_empty()
    );
    let lost = |r: Result<()>| {
        assert!(
            matches!(r, Err(Error::LeaseLost { job_id }) if job_id == id),
            "{r:?}"
        )
    };
    lost(
        db.b.job_fail(JobFailParams {
            job: old,
            now: later,
            error: "x".into(),
            cancelled: false,
            retry_at: Some(later),
        })
        .await,
    );
    lost(
        db.b.job_heartbeat(JobHeartbeatParams {
            job: old,
            lease_expires_at: later + 100 * SEC,
        })
        .await
        .map(|_| ()),
    );
    lost(
        db.b.job_release(JobReleaseParams {
            job: old,
            now: later,
            run_at: later,
        })
        .await,
    );
    let j = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!(
        (j.state, j.lease_token, j.errors.len()),
        (JobState::Running, Some(new.lease_token), 1)
    );
    // The current holder completes.
    assert_eq!(
        complete(&db, vec![new.job_ref()], later, Retention::Keep).await,
        vec![new.job_ref()]
    );
    lost(
        db.b.job_heartbeat(JobHeartbeatParams {
            job: new.job_ref(),
            lease_expires_at: later,
        })
        .await
        .map(|_| ()),
    );
}

async fn fail_retries_then_dies(db: Db) {
    let now = db.now;
    let mut j = job("fl", "{}");
    j.max_attempts = Some(2);
    let id = ids(&db, vec![j], now).await[0];
    let c =
        db.b.job_claim(&claim("fl", 1, now, db.strategy()))
            .await
            .unwrap()[0]
            .job_ref();
    db.b.job_fail(JobFailParams {
        job: c,
        now,
        error: "boom 1".into(),
        cancelled: false,
        retry_at: Some(now + 5 * SEC),
    })
    .await
    .unwrap();
    let st = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!(
        (st.state, st.run_at, st.reported_state(now)),
        (JobState::Available, now + 5 * SEC, "retrying")
    );
    assert_eq!(
        st.errors,
        vec![ErrorRecord {
            attempt: 1,
            at: now,
            error: "boom 1".into()
        }]
    );
    let listed =
        db.b.job_list(JobListParams {
            queue: Some(q("fl")),
            state: Some(StateFilter::Retrying),
            kind: None,
            unique_key: None,
            after_id: 0,
            limit: 10,
            now,
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        db.b.job_claim(&claim("fl", 1, now + SEC, db.strategy()))
            .await
            .unwrap()
            .is_empty()
    );
    let t = now + 5 * SEC;
    let c =
        db.b.job_claim(&claim("fl", 1, t, db.strategy()))
            .await
            .unwrap()[0]
            .clone();
    assert_eq!(c.attempt, 2);
    db.b.job_fail(JobFailParams {
        job: c.job_ref(),
        now: t,
        error: "boom 2".into(),
        cancelled: false,
        retry_at: None,
    })
    .await
    .unwrap();
    let st = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!(
        (st.state, st.finished_at, st.errors.len()),
        (JobState::Dead, Some(t), 2)
    );
    assert_eq!(st.errors[1].error, "boom 2");
}

async fn release_and_heartbeat(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("rh", "{}")], now).await[0];
    let c =
        db.b.job_claim(&claim("rh", 1, now, db.strategy()))
            .await
            .unwrap()[0]
            .job_ref();
    db.b.job_release(JobReleaseParams {
        job: c,
        now,
        run_at: now + 3 * SEC,
    })
    .await
    .unwrap();
    let j = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!(
        (j.state, j.attempt, j.run_at, j.lease_token),
        (JobState::Available, 0, now + 3 * SEC, None)
    );
    let t = now + 3 * SEC;
    let mut p = claim("rh", 1, t, db.strategy());
    p.lease = Duration::from_secs(1);
    let c = db.b.job_claim(&p).await.unwrap()[0].clone();
    assert_eq!(c.attempt, 1);
    db.b.job_heartbeat(JobHeartbeatParams {
        job: c.job_ref(),
        lease_expires_at: t + 60 * SEC,
    })
    .await
    .unwrap();
    assert_eq!(
        db.b.job_rescue(JobRescueParams {
            now: t + 10 * SEC,
            limit: 10
        })
        .await
        .unwrap()
        .len(),
        0
    );
    assert_eq!(state_of(&db, id).await, JobState::Running);
}

async fn rescue_of_last_attempt_is_dead(db: Db) {
    let now = db.now;
    let mut s = QueueSettings::defaults(q("rd"));
    s.max_attempts = 1;
    db.b.queue_upsert(&s, now).await.unwrap();
    let id = ids(&db, vec![job("rd", "{}")], now).await[0];
    let mut p = claim("rd", 1, now, db.strategy());
    p.lease = Duration::from_secs(1);
    db.b.job_claim(&p).await.unwrap();
    assert_eq!(
        db.b.job_rescue(JobRescueParams {
            now: now + 5 * SEC,
            limit: 10
        })
        .await
        .unwrap()
        .len(),
        1
    );
    let j = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!((j.state, j.errors.len()), (JobState::Dead, 1));
}

/// A batch limit holds whatever plan the database picks: a rescue or redrive of 2 moves 2 of 3.
async fn rescue_and_redrive_stay_within_their_limit(db: Db) {
    let now = db.now;
    let mut s = QueueSettings::defaults(q("lim"));
    s.max_attempts = 1;
    db.b.queue_upsert(&s, now).await.unwrap();
    let id = ids(
        &db,
        vec![job("lim", "{}"), job("lim", "{}"), job("lim", "{}")],
        now,
    )
    .await;
    let mut p = claim("lim", 3, now, db.strategy());
    p.lease = Duration::from_secs(1);
    assert_eq!(db.b.job_claim(&p).await.unwrap().len(), 3);
    let rescue = |limit| {
        db.b.job_rescue(JobRescueParams {
            now: now + 5 * SEC,
            limit,
        })
    };
    assert_eq!(rescue(2).await.unwrap().len(), 2);
    assert_eq!(rescue(2).await.unwrap().len(), 1);
    for id in &id {
        assert_eq!(state_of(&db, *id).await, JobState::Dead);
    }
    let redrive = |limit| {
        db.b.queue_redrive(QueueRedriveParams {
            queue: q("lim"),
            limit,
            now: now + 6 * SEC,
        })
    };
    assert_eq!(redrive(2).await.unwrap(), 2);
    assert_eq!(state_of(&db, id[2]).await, JobState::Dead, "oldest first");
    assert_eq!(redrive(2).await.unwrap(), 1);
}

async fn operator_actions(db: Db) {
    let now = db.now;
    let id = ids(
        &db,
        vec![job("ad", "1"), job("ad", "2"), job("ad", "3")],
        now,
    )
    .await;
    // hold / release (seed S3's "pending review")
    assert_eq!(
        db.b.job_admin(id[0], AdminAction::Hold, now)
            .await
            .unwrap()
            .state,
        JobState::Held
    );
    let c =
        db.b.job_claim(&claim("ad", 10, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(c.len(), 2, "held job was claimed");
    assert_eq!(
        db.b.job_admin(id[0], AdminAction::Release, now)
            .await
            .unwrap()
            .state,
        JobState::Available
    );
    // cancel an available job; a running one is refused
    assert_eq!(
        db.b.job_admin(id[0], AdminAction::Cancel, now)
            .await
            .unwrap()
            .state,
        JobState::Cancelled
    );
    let e =
        db.b.job_admin(id[1], AdminAction::Cancel, now)
            .await
            .unwrap_err();
    assert!(
        matches!(
            e,
            Error::JobStateConflict {
                state: JobState::Running,
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        db.b.job_admin(999_999_999, AdminAction::Cancel, now).await,
        Err(Error::JobNotFound { .. })
    ));
    // retry a cancelled job: attempts reset
    let r =
        db.b.job_admin(id[0], AdminAction::Retry, now + 1)
            .await
            .unwrap();
    assert_eq!(
        (r.state, r.attempt, r.run_at, r.finished_at),
        (JobState::Available, 0, now + 1, None)
    );
    // dead jobs, then redrive
    for c in &c {
        db.b.job_fail(JobFailParams {
            job: c.job_ref(),
            now,
            error: "no".into(),
            cancelled: false,
            retry_at: None,
        })
        .await
        .unwrap();
    }
    let dead =
        db.b.job_list(JobListParams {
            queue: Some(q("ad")),
            state: Some(StateFilter::Stored(JobState::Dead)),
            kind: None,
            unique_key: None,
            after_id: 0,
            limit: 10,
            now,
        })
        .await
        .unwrap();
    assert_eq!(dead.len(), 2);
    assert!(matches!(
        db.b.job_admin(id[1], AdminAction::Hold, now).await,
        Err(Error::JobStateConflict { .. })
    ));
    assert_eq!(
        db.b.job_admin(id[1], AdminAction::Retry, now)
            .await
            .unwrap()
            .state,
        JobState::Available
    );
    assert_eq!(
        db.b.queue_redrive(QueueRedriveParams {
            queue: q("ad"),
            limit: 10,
            now
        })
        .await
        .unwrap(),
        1
    );
    assert_eq!(state_of(&db, id[2]).await, JobState::Available);
    assert_eq!(pending(&db, &["ad", "none"]).await, 3);
}

async fn redrive_skips_taken_unique_keys(db: Db) {
    let now = db.now;
    let a = enqueue(&db, vec![keyed("rk", "k")], now).await[0].id;
    let c =
        db.b.job_claim(&claim("rk", 1, now, db.strategy()))
            .await
            .unwrap()[0]
            .job_ref();
    db.b.job_fail(JobFailParams {
        job: c,
        now,
        error: "x".into(),
        cancelled: false,
        retry_at: None,
    })
    .await
    .unwrap();
    let b = enqueue(&db, vec![keyed("rk", "k"), job("rk", "{}")], now).await;
    assert!(b[0].created && b[0].id != a);
    let d =
        db.b.job_claim(&claim("rk", 2, now, db.strategy()))
            .await
            .unwrap();
    let plain = d.iter().find(|x| x.id == b[1].id).unwrap().job_ref();
    db.b.job_fail(JobFailParams {
        job: plain,
        now,
        error: "x".into(),
        cancelled: false,
        retry_at: None,
    })
    .await
    .unwrap();
    // Job a's key is held by b: a stays dead, the other dead job comes back.
    assert_eq!(
        db.b.queue_redrive(QueueRedriveParams {
            queue: q("rk"),
            limit: 10,
            now
        })
        .await
        .unwrap(),
        1
    );
    assert_eq!(state_of(&db, a).await, JobState::Dead);
    assert_eq!(state_of(&db, b[1].id).await, JobState::Available);
}

async fn stats_and_lists(db: Db) {
    let now = db.now;
    let mut later = job("st", "{}");
    later.run_at = Some(now + 100 * SEC);
    let id = ids(
        &db,
        vec![job("st", "{}"), job("st", "{}"), later, job("st", "{}")],
        now,
    )
    .await;
    db.b.job_admin(id[3], AdminAction::Hold, now).await.unwrap();
    let c =
        db.b.job_claim(&claim("st", 1, now, db.strategy()))
            .await
            .unwrap();
    complete(&db, vec![c[0].job_ref()], now, Retention::Keep).await;
    db.b.queue_ensure(&q("empty"), now).await.unwrap();
    let all = db.b.queue_stats(None, now).await.unwrap();
    let st = &all.iter().find(|(n, _)| n == "st").unwrap().1;
    assert_eq!(
        *st,
        QueueStats {
            available: 1,
            scheduled: 1,
            running: 0,
            completed: 1,
            dead: 0,
            cancelled: 0,
            held: 1,
            waiting: 0,
            archived: 0,
        }
    );
    assert!(
        all.iter()
            .any(|(n, s)| n == "empty" && *s == QueueStats::default())
    );
    // Jobs the archive retention (or an archiving prune) moved out are counted as archived,
    // whatever state they finished in, and no longer under that state.
    let sa = ids(&db, (0..4).map(|_| job("sa", "{}")).collect(), now).await;
    let c =
        db.b.job_claim(&claim("sa", 4, now, db.strategy()))
            .await
            .unwrap();
    let by_id = |i: i64| c.iter().find(|x| x.id == i).unwrap().job_ref();
    complete(
        &db,
        vec![by_id(sa[0]), by_id(sa[1])],
        now,
        Retention::Archive,
    )
    .await;
    complete(&db, vec![by_id(sa[2])], now, Retention::Keep).await;
    db.b.job_fail(JobFailParams {
        job: by_id(sa[3]),
        now,
        error: "no".into(),
        retry_at: None,
        cancelled: false,
    })
    .await
    .unwrap();
    let pruned =
        db.b.job_prune(JobPruneParams {
            queue: q("sa"),
            state: JobState::Dead,
            finished_before: now + 1,
            limit: 10,
            archive: true,
        })
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    let archived = QueueStats {
        completed: 1,
        archived: 3,
        ..QueueStats::default()
    };
    let one = db.b.queue_stats(Some(&q("sa")), now).await.unwrap();
    assert_eq!(one, vec![("sa".to_string(), archived.clone())]);
    let all = db.b.queue_stats(None, now).await.unwrap();
    assert_eq!(all.iter().find(|(n, _)| n == "sa").unwrap().1, archived);
    assert_eq!(
        all.iter().find(|(n, _)| n == "st").unwrap().1.archived,
        0,
        "another queue's archive is not counted"
    );
    let list = |state: Option<StateFilter>| {
        let b = db.b.clone();
        async move {
            b.job_list(JobListParams {
                queue: Some(q("st")),
                state,
                kind: None,
                unique_key: None,
                after_id: 0,
                limit: 100,
                now,
            })
            .await
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(None).await, id);
    assert_eq!(list(Some(StateFilter::Scheduled)).await, vec![id[2]]);
    assert_eq!(
        list(Some(StateFilter::Stored(JobState::Available))).await,
        vec![id[1]]
    );
    assert_eq!(
        list(Some(StateFilter::Stored(JobState::Held))).await,
        vec![id[3]]
    );
    let page =
        db.b.job_list(JobListParams {
            queue: None,
            state: None,
            kind: None,
            unique_key: None,
            after_id: id[1],
            limit: 1,
            now,
        })
        .await
        .unwrap();
    assert_eq!(page[0].id, id[2]);
    // A kind filter, alone and with a state.
    let mut a = job("kl", "{}");
    a.kind = Some(Kind::new("ka").unwrap());
    let mut b = job("kl", "{}");
    b.kind = Some(Kind::new("kb").unwrap());
    let kl = ids(&db, vec![a.clone(), b, a], now).await;
    for state in [None, Some(StateFilter::Stored(JobState::Available))] {
        let of_kind: Vec<i64> =
            db.b.job_list(JobListParams {
                queue: Some(q("kl")),
                state,
                kind: Some(Kind::new("ka").unwrap()),
                unique_key: None,
                after_id: 0,
                limit: 10,
                now,
            })
            .await
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(of_kind, vec![kl[0], kl[2]]);
    }
    // By unique key, across queues.
    let keyed_ids = ids(&db, vec![keyed("ku1", "k-1"), keyed("ku2", "k-2")], now).await;
    let by_key: Vec<i64> =
        db.b.job_list(JobListParams {
            queue: None,
            state: None,
            kind: None,
            unique_key: Some("k-2".into()),
            after_id: 0,
            limit: 10,
            now,
        })
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(by_key, vec![keyed_ids[1]]);
    let queues = db.b.queue_list().await.unwrap();
    let stq = queues
        .iter()
        .find(|i| i.settings.name.as_str() == "st")
        .expect("queue with jobs is listed");
    assert_eq!(stq.pending, 3);
    assert!(queues.iter().any(|i| i.settings.name.as_str() == "empty"));
}

async fn schema_version_and_oldest_due(db: Db) {
    let now = db.now;
    assert_eq!(
        db.b.schema_version().await.unwrap(),
        backlog_sql::SCHEMA_VERSION
    );
    ids(&db, vec![job("lag_a", "{}")], now - 5 * SEC).await;
    let mut later = job("lag_a", "{}");
    later.run_at = Some(now - 2 * SEC);
    let mut future = job("lag_b", "{}");
    future.run_at = Some(now + 60 * SEC);
    ids(&db, vec![later, future], now - 5 * SEC).await;
    let running = ids(&db, vec![job("lag_c", "{}")], now - 9 * SEC).await;
    db.b.job_claim(&claim("lag_c", 1, now, db.strategy()))
        .await
        .unwrap();
    assert_eq!(running.len(), 1);
    let mut oldest = db.b.queue_oldest_due(now).await.unwrap();
    oldest.sort();
    // lag_b's only job is not due and lag_c's is running: neither is behind.
    assert_eq!(oldest, vec![("lag_a".to_owned(), now - 5 * SEC)]);
}

async fn stats_history_and_audit(db: Db) {
    let m1 = minute_of(db.now);
    let m2 = m1 + 60 * SEC;
    let row = |queue: &str, minute, f: &dyn Fn(&mut StatCounts)| {
        let mut counts = StatCounts::default();
        f(&mut counts);
        StatRow {
            queue: queue.into(),
            minute,
            counts,
            depth: None,
        }
    };
    db.b.stat_add(&[
        row("s1", m1, &|c| {
            c.enqueued = 3;
            c.record_wait(500);
        }),
        row("s1", m2, &|c| c.completed = 4),
    ])
    .await
    .unwrap();
    // Another process adds to the same minute.
    db.b.stat_add(&[
        row("s1", m1, &|c| c.enqueued = 2),
        row("s2", m2, &|c| {
            c.failed = 1;
            c.dead = 1;
            c.record_wait(120 * SEC);
        }),
    ])
    .await
    .unwrap();
    let depth = StatDepth {
        available: 1,
        scheduled: 2,
        running: 3,
        dead: 4,
    };
    db.b.stat_snapshot(m2, &[("s1".into(), depth)])
        .await
        .unwrap();

    let all = db.b.stat_history(None, m1).await.unwrap();
    let keys: Vec<(&str, i64)> = all.iter().map(|r| (r.queue.as_str(), r.minute)).collect();
    assert_eq!(keys, vec![("s1", m1), ("s1", m2), ("s2", m2)]);
    assert_eq!(all[0].counts.enqueued, 5);
    assert_eq!((all[0].counts.wait[0], all[0].counts.wait_sum_us), (1, 500));
    assert_eq!(all[0].depth, None);
    assert_eq!((all[1].counts.completed, all[1].depth), (4, Some(depth)));
    assert_eq!(all[2].counts.wait[6], 1, "over 60 s");
    let s2 = db.b.stat_history(Some(&q("s2")), m1).await.unwrap();
    assert_eq!((s2.len(), s2[0].counts.dead), (1, 1));
    assert_eq!(db.b.stat_history(None, m2).await.unwrap().len(), 2);

    let totals = |t: Vec<StatRow>| -> Vec<(String, i64, i64, i64)> {
        t.into_iter()
            .map(|r| {
                (
                    r.queue,
                    r.counts.enqueued,
                    r.counts.completed,
                    r.counts.failed,
                )
            })
            .collect()
    };
    let before = totals(db.b.stat_totals().await.unwrap());
    assert_eq!(before, vec![("s1".into(), 5, 4, 0), ("s2".into(), 0, 0, 1)]);
    // Pruning folds old minutes into minute 0: history loses them, totals do not change.
    assert_eq!(db.b.stat_prune(m2).await.unwrap(), 1);
    assert_eq!(totals(db.b.stat_totals().await.unwrap()), before);
    assert_eq!(db.b.stat_history(None, 1).await.unwrap().len(), 2);
    assert_eq!(db.b.stat_prune(m2).await.unwrap(), 0);
    assert_eq!(totals(db.b.stat_totals().await.unwrap()), before);

    // The audit log, newest first, paged and filtered by queue.
    let mut ids = vec![];
    for (i, (action, queue)) in [
        ("queue.pause", "a1"),
        ("job.retry", "a2"),
        ("queue.settings", "a1"),
    ]
    .into_iter()
    .enumerate()
    {
        let e = AuditEntry {
            id: 0,
            at: db.now + i as i64,
            actor: "ops".into(),
            action: action.into(),
            queue: Some(queue.into()),
            job_id: (action == "job.retry").then_some(42),
            detail: format!(r#"{{"n": {i}}}"#),
        };
        ids.push(db.b.audit_add(&e).await.unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let list = |before_id, queue: Option<&str>, limit| AuditListParams {
        before_id,
        queue: queue.map(q),
        limit,
    };
    let newest = db.b.audit_list(&list(i64::MAX, None, 2)).await.unwrap();
    assert_eq!(
        newest.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        vec!["queue.settings", "job.retry"]
    );
    assert_eq!(newest[1].job_id, Some(42));
    let detail: serde_json::Value = serde_json::from_str(&newest[0].detail).unwrap();
    assert_eq!(detail, serde_json::json!({"n": 2}));
    let older =
        db.b.audit_list(&list(newest[1].id, None, 10))
            .await
            .unwrap();
    assert_eq!((older.len(), older[0].id), (1, ids[0]));
    let a1 =
        db.b.audit_list(&list(i64::MAX, Some("a1"), 10))
            .await
            .unwrap();
    assert_eq!(a1.len(), 2);
    assert!(
        a1.iter()
            .all(|e| e.queue.as_deref() == Some("a1") && e.actor == "ops")
    );
}

/// A session idle in a transaction is seen, with its age: it keeps completed jobs' rows from
/// being reclaimed. Other tests' sessions may be older; the one reported is never younger.
async fn oldest_open_transaction(db: Db) {
    use sqlx::Connection as _;
    match db.engine {
        harness::Engine::Sqlite | harness::Engine::Memory => {
            assert_eq!(db.b.db_oldest_transaction().await.unwrap(), None);
        }
        harness::Engine::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
            sqlx::raw_sql("BEGIN; SELECT txid_current();")
                .execute(&mut c)
                .await
                .unwrap();
            let ours: f64 = sqlx::query_scalar(
                "SELECT EXTRACT(EPOCH FROM (clock_timestamp() - xact_start))::float8 \
                 FROM pg_stat_activity WHERE pid = pg_backend_pid()",
            )
            .fetch_one(&mut c)
            .await
            .unwrap();
            let t =
                db.b.db_oldest_transaction()
                    .await
                    .unwrap()
                    .expect("ours is open");
            assert!(
                t.age.as_secs_f64() >= ours,
                "{t:?} younger than ours ({ours} s)"
            );
            c.close().await.unwrap();
        }
        harness::Engine::MySql => {
            let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            sqlx::raw_sql("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                .execute(&mut c)
                .await
                .unwrap();
            let t =
                db.b.db_oldest_transaction()
                    .await
                    .unwrap()
                    .expect("ours is open");
            assert!(t.pid > 0, "{t:?}");
            c.close().await.unwrap();
        }
    }
}

async fn queue_settings_round_trip(db: Db) {
    let now = db.now;
    assert!(db.b.queue_get(&q("cfg")).await.unwrap().is_none());
    let s = QueueSettings {
        name: q("cfg"),
        paused: false,
        max_attempts: 7,
        backoff_base: Duration::from_millis(250),
        backoff_max: Duration::from_secs(90),
        lease: Duration::from_secs(45),
        order: Ordering::Lifo,
        retention: Retention::Archive,
        concurrency: Some(3),
        global_concurrency: Some(12),
        group_concurrency: 2,
        group_on_failure: GroupFailure::Next,
        rate_limit: Some(RateLimit {
            starts: 100,
            period: Duration::from_secs(60),
        }),
        group_rate_limit: Some(RateLimit {
            starts: 3,
            period: Duration::from_millis(1500),
        }),
        shards: 16,
    };
    db.b.queue_upsert(&s, now).await.unwrap();
    assert_eq!(db.b.queue_get(&q("cfg")).await.unwrap().unwrap(), s);
    db.b.queue_ensure(&q("cfg"), now).await.unwrap(); // does not reset
    assert_eq!(db.b.queue_get(&q("cfg")).await.unwrap().unwrap(), s);
}

async fn concurrent_claimers_never_share_a_job(db: Db) {
    for strategy in db.strategies() {
        let qn = format!("many-{}", harness::strategy_name(strategy));
        let n = 10_000usize;
        let jobs: Vec<NewJob> = (0..n).map(|_| job(&qn, "{}")).collect();
        enqueue(&db, jobs, db.now).await;
        let all = claim_all_at_once(&db, &qn, strategy, 25).await;
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            all.len(),
            "a job was handed to two claimers ({strategy:?})"
        );
        assert_eq!(all.len(), n, "jobs were lost ({strategy:?})");
    }
}

/// 16 claimers of `qn` at once, each claiming up to `limit` at a time and completing what it
/// took, until each finds nothing three times running; the ids of every claim, repeats kept.
async fn claim_all_at_once(db: &Db, qn: &str, strategy: ClaimStrategy, limit: u32) -> Vec<i64> {
    let mut handles = vec![];
    for w in 0..16 {
        let b = db.b.clone();
        let qn = qn.to_owned();
        let now = db.now;
        handles.push(tokio::spawn(async move {
            let mut mine = vec![];
            let mut empty = 0;
            while empty < 3 {
                let mut p = claim(&qn, limit, now, strategy);
                p.owner = format!("w{w}");
                let got = b.job_claim(&p).await.unwrap();
                if got.is_empty() {
                    empty += 1;
                    tokio::task::yield_now().await;
                    continue;
                }
                empty = 0;
                let refs: Vec<JobRef> = got.iter().map(|c| c.job_ref()).collect();
                let done = (b.job_complete(JobCompleteParams {
                    jobs: refs.clone(),
                    now,
                    retention: Retention::Delete,
                }))
                .await
                .unwrap();
                assert_eq!(
                    done.len(),
                    refs.len(),
                    "a claimed job could not be completed"
                );
                mine.extend(got.iter().map(|c| c.id));
            }
            mine
        }));
    }
    let mut all = vec![];
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all
}

/// A queue spread over 8 shards: single and batched enqueues land on the shards (where claims
/// are sharded), and 16 concurrent claimers, each starting at a random shard, take every job
/// exactly once and leave none behind.
async fn sharded_claims_take_every_job_once(db: Db) {
    for strategy in db.strategies() {
        let qn = format!("sharded-{}", harness::strategy_name(strategy));
        let settings = QueueSettings {
            shards: 8,
            ..QueueSettings::defaults(q(&qn))
        };
        db.b.queue_upsert(&settings, db.now).await.unwrap();
        let mut want: HashSet<i64> = HashSet::new();
        for _ in 0..40 {
            want.extend(ids(&db, vec![job(&qn, "{}")], db.now).await);
        }
        let batch: Vec<NewJob> = (0..1960).map(|_| job(&qn, "{}")).collect();
        want.extend(ids(&db, batch, db.now).await);
        if let Some(counts) = db.shard_counts(&qn).await {
            assert_eq!(counts.len(), 8, "2,000 jobs on every shard: {counts:?}");
            assert!(counts.keys().all(|s| (0..8).contains(s)), "{counts:?}");
            assert!(
                counts.values().all(|&n| n > 150),
                "roughly even: {counts:?}"
            );
        }
        let all = claim_all_at_once(&db, &qn, strategy, 7).await;
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            all.len(),
            "a job went to two claimers ({strategy:?})"
        );
        assert_eq!(distinct, want, "every job, once ({strategy:?})");
        // An empty claim means the whole queue is empty: no shard was left unvisited.
        assert!(
            db.b.job_claim(&claim(&qn, 7, db.now, strategy))
                .await
                .unwrap()
                .is_empty()
        );
    }
}

/// A queue's shards lowered while it holds jobs: the available jobs move at once to the shards
/// left, in one strict order again, and jobs that were running on a dropped shard move when the
/// leader's sweep finds them available again. No job is stranded where no claim looks.
async fn lowering_a_queues_shards_strands_no_job(db: Db) {
    let now = db.now;
    let qn = "reshard";
    let mut settings = QueueSettings {
        shards: 8,
        ..QueueSettings::defaults(q(qn))
    };
    db.b.queue_upsert(&settings, now).await.unwrap();
    let all = ids(&db, (0..100).map(|_| job(qn, "{}")).collect(), now).await;
    let strategy = db.strategies()[0];
    let running = db.b.job_claim(&claim(qn, 30, now, strategy)).await.unwrap();
    assert_eq!(running.len(), 30);
    settings.shards = 1;
    db.b.queue_upsert(&settings, now).await.unwrap();
    if let Some(counts) = db.shard_counts(qn).await {
        assert_eq!(
            counts.keys().copied().collect::<Vec<_>>(),
            vec![0],
            "{counts:?}"
        );
    }
    // One head again: the rest come in enqueue order.
    let rest =
        db.b.job_claim(&claim(qn, 100, now, strategy))
            .await
            .unwrap();
    let running_ids: HashSet<i64> = running.iter().map(|c| c.id).collect();
    let want: Vec<i64> = all
        .iter()
        .copied()
        .filter(|id| !running_ids.contains(id))
        .collect();
    assert_eq!(rest.iter().map(|c| c.id).collect::<Vec<_>>(), want);
    // The 30 come back to be retried, still on their old shards until a sweep moves them.
    for c in &running {
        (db.b.job_fail(JobFailParams {
            job: c.job_ref(),
            now,
            error: "again".into(),
            cancelled: false,
            retry_at: Some(now),
        }))
        .await
        .unwrap();
    }
    db.b.group_sweep(now).await.unwrap();
    let again =
        db.b.job_claim(&claim(qn, 100, now, strategy))
            .await
            .unwrap();
    let mut got: Vec<i64> = again.iter().map(|c| c.id).collect();
    got.sort_unstable();
    let mut want: Vec<i64> = running_ids.into_iter().collect();
    want.sort_unstable();
    assert_eq!(got, want);
}

/// A queue's shards raised by another process after this one last read the count (it claimed
/// from the queue's one head before): this process's next claims still take every job, wherever
/// the other process put it, before they come back short.
async fn shards_raised_elsewhere_are_claimed_at_once(db: Db) {
    let now = db.now;
    let qn = "raised";
    let strategy = db.strategies()[0];
    db.b.queue_upsert(&QueueSettings::defaults(q(qn)), now)
        .await
        .unwrap();
    ids(&db, vec![job(qn, "{}")], now).await;
    assert_eq!(
        db.b.job_claim(&claim(qn, 10, now, strategy))
            .await
            .unwrap()
            .len(),
        1
    );
    let other = db.connect_again().await;
    let settings = QueueSettings {
        shards: 8,
        ..QueueSettings::defaults(q(qn))
    };
    other.queue_upsert(&settings, now).await.unwrap();
    let batch: Vec<NewJob> = (0..200).map(|_| job(qn, "{}")).collect();
    let want: HashSet<i64> = (other.job_insert(JobInsertParams { jobs: batch, now }).await)
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    other.close().await;
    if let Some(counts) = db.shard_counts(qn).await {
        assert!(counts.len() > 1, "spread over the shards: {counts:?}");
    }
    let mut got = HashSet::new();
    loop {
        let claimed = db.b.job_claim(&claim(qn, 30, now, strategy)).await.unwrap();
        let short = claimed.len() < 30;
        got.extend(claimed.iter().map(|c| c.id));
        if short {
            break;
        }
    }
    assert_eq!(got, want, "every job before the first short claim");
}

/// Claimers of four processes (each its own connection pool, as `connect_again` opens it; on
/// Galera each on another node, where row locks do not reach and two nodes' claims of one job
/// meet only at commit): no job reaches two of them, none is lost, and every claimed job's
/// completion counts.
async fn claimers_of_several_processes_never_share_a_job(db: Db) {
    let qn = "spread";
    let n = 2_000usize;
    enqueue(&db, (0..n).map(|_| job(qn, "{}")).collect(), db.now).await;
    let mut handles = vec![];
    for w in 0..4 {
        let b = db.connect_again().await;
        let strategy = db.strategy();
        let now = db.now;
        handles.push(tokio::spawn(async move {
            let mut claimers = vec![];
            for c in 0..4 {
                let b = b.clone();
                claimers.push(tokio::spawn(async move {
                    let (mut mine, mut empty) = (vec![], 0);
                    while empty < 3 {
                        let mut p = claim(qn, 20, now, strategy);
                        p.owner = format!("p{w}-c{c}");
                        let got = transient_retried(|| b.job_claim(&p)).await;
                        if got.is_empty() {
                            empty += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                        empty = 0;
                        let refs: Vec<JobRef> = got.iter().map(|c| c.job_ref()).collect();
                        // A completion that failed for now is sent again: the lease token
                        // makes a repeat safe.
                        let done = transient_retried(|| {
                            b.job_complete(JobCompleteParams {
                                jobs: refs.clone(),
                                now,
                                retention: Retention::Keep,
                            })
                        })
                        .await;
                        assert_eq!(done.len(), refs.len(), "a claimed job was not completed");
                        mine.extend(got.iter().map(|c| c.id));
                    }
                    mine
                }));
            }
            let mut mine = vec![];
            for c in claimers {
                mine.extend(c.await.unwrap());
            }
            b.close().await;
            mine
        }));
    }
    let mut all = vec![];
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a job was handed to two claimers"
    );
    assert_eq!(all.len(), n, "jobs were lost");
    assert_eq!(pending(&db, &[qn]).await, 0);
}

/// `op` until it succeeds, again after each transient error (a call the backend itself gave up
/// retrying, such as a claim that lost certification on a Galera cluster again and again), at
/// most 100 times.
async fn transient_retried<T, F, Fut>(mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    for _ in 0..100 {
        match op().await {
            Ok(v) => return v,
            Err(e) if e.is_transient() => {
                tokio::time::sleep(Duration::from_millis(5 + rand::random::<u64>() % 20)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("still failing after 100 tries");
}

/// Workers that complete each batch with their next claim (as the runtime does): no job reaches
/// two of them, none is lost, and every completion counts.
async fn concurrent_complete_claim_loops(db: Db) {
    for strategy in db.strategies() {
        let qn = format!("loop-{}", harness::strategy_name(strategy));
        let n = 5_000usize;
        enqueue(&db, (0..n).map(|_| job(&qn, "{}")).collect(), db.now).await;
        let mut handles = vec![];
        for w in 0..8 {
            let (b, qn, now) = (db.b.clone(), qn.clone(), db.now);
            handles.push(tokio::spawn(async move {
                let (mut mine, mut completed) = (vec![], 0usize);
                let mut held: Vec<JobRef> = vec![];
                let (mut empty, mut full) = (0, false);
                while empty < 3 {
                    let mut p = claim(&qn, 25, now, strategy);
                    p.owner = format!("w{w}");
                    let r = b
                        .job_complete_claim(JobCompleteClaimParams {
                            complete: JobCompleteParams {
                                jobs: std::mem::take(&mut held),
                                now,
                                retention: Retention::Delete,
                            },
                            claim: p,
                            // As a client does: the last claim was full.
                            expect_jobs: full,
                            groups: vec![],
                        })
                        .await
                        .unwrap();
                    completed += r.completed.len();
                    let got = r.claimed.unwrap();
                    full = got.len() == 25;
                    if got.is_empty() {
                        empty += 1;
                        tokio::task::yield_now().await;
                    } else {
                        empty = 0;
                    }
                    mine.extend(got.iter().map(|c| c.id));
                    held = got.iter().map(|c| c.job_ref()).collect();
                }
                assert!(held.is_empty());
                (mine, completed)
            }));
        }
        let (mut all, mut completed) = (vec![], 0);
        for h in handles {
            let (mine, c) = h.await.unwrap();
            all.extend(mine);
            completed += c;
        }
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            all.len(),
            "a job was handed to two workers ({strategy:?})"
        );
        assert_eq!(all.len(), n, "jobs were lost ({strategy:?})");
        assert_eq!(
            completed, n,
            "a claimed job could not be completed ({strategy:?})"
        );
        assert_eq!(pending(&db, &[&qn]).await, 0);
    }
}

async fn transaction_claim_mode(db: Db) {
    let now = db.now;
    if !db.b.capabilities().row_locks {
        let r = db.b.job_claim_tx(&claim("tx", 1, now, db.strategy())).await;
        assert!(matches!(r, Err(Error::Unsupported(_))));
        return;
    }
    let id = ids(&db, vec![job("tx", "1"), job("tx", "2")], now).await;
    let held =
        db.b.job_claim_tx(&claim("tx", 1, now, db.strategy()))
            .await
            .unwrap()
            .expect("a job");
    assert_eq!(held.job().id, id[0]);
    // The row lock hides it from other claimers, who get the next job.
    let other =
        db.b.job_claim(&claim("tx", 5, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(other.iter().map(|c| c.id).collect::<Vec<_>>(), vec![id[1]]);
    // Dropping the transaction (a dead connection) frees the job at once, no attempt used.
    drop(held);
    let mut again = None;
    for _ in 0..100 {
        if let Some(t) =
            db.b.job_claim_tx(&claim("tx", 1, now, db.strategy()))
                .await
                .unwrap()
        {
            again = Some(t);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = again.expect("job free again after the transaction dropped");
    assert_eq!((again.job().id, again.job().attempt), (id[0], 1));
    again.complete(now, Retention::Keep).await.unwrap();
    assert_eq!(state_of(&db, id[0]).await, JobState::Completed);
    let t =
        db.b.job_claim_tx(&claim("tx", 1, now, db.strategy()))
            .await
            .unwrap();
    assert!(t.is_none(), "job 2 is running, nothing else is available");
}

/// Transaction claim mode in batches: one transaction locks several jobs and writes nothing to
/// them until it ends, when each is completed, failed, leased to run on, or let go as if never
/// claimed; a finish naming a job twice, or one the claim does not hold, changes nothing.
async fn transaction_claims_in_batches(db: Db) {
    if !db.b.capabilities().row_locks {
        return; // no transaction claim mode (transaction_claim_mode checks the refusal)
    }
    let now = db.now;
    let (later, retry_at) = (now + SEC, now + 60 * SEC);
    for retention in [Retention::Keep, Retention::Delete, Retention::Archive] {
        let qn = format!("txb_{retention:?}").to_lowercase();
        let jobs = (0..6).map(|i| job(&qn, &i.to_string())).collect();
        let id = ids(&db, jobs, now).await;
        let held =
            db.b.job_claim_tx(&claim(&qn, 5, now, db.strategy()))
                .await
                .unwrap()
                .expect("jobs");
        let got: Vec<i64> = held.jobs().iter().map(|j| j.id).collect();
        assert_eq!(got, id[..5], "FIFO, five of six");
        assert!(held.jobs().iter().all(|j| j.attempt == 1));
        // Nothing written while the transaction is open: other sessions see the jobs as they
        // were, and other claimers pass over them.
        let seen = db.b.job_get(id[0]).await.unwrap().unwrap();
        assert_eq!((seen.state, seen.attempt), (JobState::Available, 0));
        let other =
            db.b.job_claim(&claim(&qn, 10, now, db.strategy()))
                .await
                .unwrap();
        assert_eq!(other.iter().map(|c| c.id).collect::<Vec<_>>(), vec![id[5]]);
        let token = held.jobs()[3].lease_token;

        let mut finish = TxFinish::new(later, retention);
        finish.completed = vec![id[1], id[0]];
        finish.failed = vec![TxFailure {
            id: id[2],
            error: "boom".into(),
            retry_at: Some(retry_at),
        }];
        finish.leased = vec![id[3]];
        held.finish(finish).await.unwrap();

        for &done in &id[..2] {
            match retention {
                Retention::Delete => assert!(db.b.job_get(done).await.unwrap().is_none()),
                Retention::Keep => {
                    let j = db.b.job_get(done).await.unwrap().unwrap();
                    assert_eq!(
                        (j.state, j.attempt, j.attempted_at, j.finished_at),
                        (JobState::Completed, 1, Some(now), Some(later))
                    );
                    assert_eq!(j.lease_owner.as_deref(), Some("test-worker"));
                }
                Retention::Archive => {
                    assert_eq!(db.archived(done).await, Some("completed".to_string()))
                }
            }
        }
        let failed = db.b.job_get(id[2]).await.unwrap().unwrap();
        assert_eq!(
            (
                failed.state,
                failed.attempt,
                failed.run_at,
                failed.errors.len()
            ),
            (JobState::Available, 1, retry_at, 1)
        );
        let leased = db.b.job_get(id[3]).await.unwrap().unwrap();
        assert_eq!(
            (leased.state, leased.attempt, leased.lease_token),
            (JobState::Running, 1, Some(token))
        );
        let untouched = db.b.job_get(id[4]).await.unwrap().unwrap();
        assert_eq!(
            (untouched.state, untouched.attempt),
            (JobState::Available, 0)
        );
        // The leased job is completed as any claimed job, fenced by its token.
        let by_token = JobRef { id: id[3], token };
        assert_eq!(
            complete(&db, vec![by_token], later, retention).await.len(),
            1
        );

        // Bad input: the same job twice, or a job the claim does not hold. Refused, nothing
        // written, and the claim's jobs are free again.
        for bad in [vec![id[4], id[4]], vec![id[4], id[5]]] {
            let held =
                db.b.job_claim_tx(&claim(&qn, 5, later, db.strategy()))
                    .await
                    .unwrap()
                    .expect("the job left alone");
            assert_eq!(
                held.jobs().iter().map(|j| j.id).collect::<Vec<_>>(),
                vec![id[4]]
            );
            let mut finish = TxFinish::new(later, retention);
            finish.completed = bad;
            let err = held.finish(finish).await.unwrap_err();
            assert!(matches!(err, Error::OptionInvalid { .. }), "{err:?}");
            let j = db.b.job_get(id[4]).await.unwrap().unwrap();
            assert_eq!((j.state, j.attempt), (JobState::Available, 0));
        }
        // Rolled back: as if never claimed.
        let held =
            db.b.job_claim_tx(&claim(&qn, 5, later, db.strategy()))
                .await
                .unwrap()
                .expect("the job left alone");
        held.rollback().await.unwrap();
        let j = db.b.job_get(id[4]).await.unwrap().unwrap();
        assert_eq!((j.state, j.attempt), (JobState::Available, 0));
    }
}

/// A job held open in transaction claim mode past its lease must not stall anyone else: the
/// rescue that every claimer runs passes over its locked row (it used to wait on it on MariaDB,
/// stopping lease-mode claims on every queue until the lock wait timed out).
async fn transaction_claim_never_stalls_others(db: Db) {
    if !db.b.capabilities().row_locks {
        return; // no transaction claim mode (transaction_claim_mode checks the refusal)
    }
    let now = db.now;
    let held_id = ids(&db, vec![job("txheld", "{}")], now).await[0];
    let mut p = claim("txheld", 1, now, db.strategy());
    p.lease = Duration::from_secs(1);
    let held = db.b.job_claim_tx(&p).await.unwrap().expect("a job");
    // A lease-mode job whose worker died, and work waiting in another queue.
    let lost = ids(&db, vec![job("txlost", "{}")], now).await[0];
    let mut p = claim("txlost", 1, now, db.strategy());
    p.lease = Duration::from_secs(1);
    assert_eq!(db.b.job_claim(&p).await.unwrap().len(), 1);
    let waiting = ids(&db, vec![job("txother", "1"), job("txother", "2")], now).await;

    // Both leases have expired by now; the held row stays locked by its open transaction.
    let later = now + 5 * SEC;
    let bound = Duration::from_secs(10);
    let rescued = tokio::time::timeout(
        bound,
        db.b.job_rescue(JobRescueParams {
            now: later,
            limit: 100,
        }),
    )
    .await
    .expect("the rescue waited on the row a transaction claim holds")
    .unwrap()
    .len();
    assert_eq!(rescued, 1, "only the lease-mode job is rescued");
    assert_eq!(state_of(&db, lost).await, JobState::Available);
    for strategy in db.strategies() {
        let mut p = claim("txother", 10, later, strategy);
        p.lease = Duration::from_secs(30);
        let got = tokio::time::timeout(bound, db.b.job_claim(&p))
            .await
            .expect("a claim in another queue waited on the held row")
            .unwrap();
        let refs: Vec<JobRef> = got.iter().map(|c| c.job_ref()).collect();
        complete(&db, refs, later, Retention::Keep).await;
    }
    for id in waiting {
        assert_eq!(state_of(&db, id).await, JobState::Completed);
    }
    // The transaction still owns its job and completes it.
    held.complete(later, Retention::Keep).await.unwrap();
    assert_eq!(state_of(&db, held_id).await, JobState::Completed);
}

async fn heartbeat_reports_cancel_requests(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("cx", "{}"), job("cx", "{}")], now).await;
    let c =
        db.b.job_claim(&claim("cx", 1, now, db.strategy()))
            .await
            .unwrap()
            .remove(0);
    let hb = |at: i64| JobHeartbeatParams {
        job: c.job_ref(),
        lease_expires_at: at,
    };
    assert!(!db.b.job_heartbeat(hb(now + 60 * SEC)).await.unwrap());
    let j = db.b.job_cancel_request(c.id, now + 1).await.unwrap();
    assert_eq!(
        (j.state, j.cancel_requested_at),
        (JobState::Running, Some(now + 1))
    );
    assert!(
        db.b.job_heartbeat(hb(now + 61 * SEC)).await.unwrap(),
        "the worker must see the request"
    );
    let other = id.iter().copied().find(|&i| i != c.id).unwrap();
    assert!(matches!(
        db.b.job_cancel_request(other, now).await,
        Err(Error::JobStateConflict {
            state: JobState::Available,
            ..
        })
    ));
    assert!(matches!(
        db.b.job_cancel_request(987_654_321, now).await,
        Err(Error::JobNotFound { .. })
    ));
    // The worker reports the cancel outcome.
    db.b.job_fail(JobFailParams {
        job: c.job_ref(),
        now: now + 2,
        error: "cancelled on request".into(),
        retry_at: None,
        cancelled: true,
    })
    .await
    .unwrap();
    let j = db.b.job_get(c.id).await.unwrap().unwrap();
    assert_eq!(
        (j.state, j.finished_at),
        (JobState::Cancelled, Some(now + 2))
    );
}

async fn progress_and_result(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("pr", "{}")], now).await[0];
    let c =
        db.b.job_claim(&claim("pr", 1, now, db.strategy()))
            .await
            .unwrap()
            .remove(0);
    db.b.job_progress(JobProgressParams {
        job: c.job_ref(),
        progress: Some(r#"{"done":3,"of":10}"#.into()),
        result: None,
    })
    .await
    .unwrap();
    db.b.job_progress(JobProgressParams {
        job: c.job_ref(),
        progress: None,
        result: Some(r#"{"sent":true}"#.into()),
    })
    .await
    .unwrap();
    let j = db.b.job_get(id).await.unwrap().unwrap();
    let v = |s: &Option<String>| {
        serde_json::from_str::<serde_json::Value>(s.as_deref().unwrap()).unwrap()
    };
    assert_eq!(v(&j.progress)["done"], 3);
    assert_eq!(v(&j.result)["sent"], true);
    let stale = JobRef {
        id,
        token: c.lease_token.wrapping_add(1),
    };
    assert!(matches!(
        db.b.job_progress(JobProgressParams {
            job: stale,
            progress: Some("1".into()),
            result: None
        })
        .await,
        Err(Error::LeaseLost { .. })
    ));
    complete(&db, vec![c.job_ref()], now, Retention::Archive).await;
    let archived =
        db.b.job_get(id)
            .await
            .unwrap()
            .expect("job show finds archived jobs");
    assert_eq!(
        (archived.state, v(&archived.result)["sent"].clone()),
        (JobState::Completed, serde_json::json!(true))
    );
}

async fn pruning_in_bounded_batches(db: Db) {
    let now = db.now;
    let id = ids(&db, (0..4).map(|_| job("pn", "{}")).collect(), now).await;
    let c =
        db.b.job_claim(&claim("pn", 4, now, db.strategy()))
            .await
            .unwrap();
    for (i, cj) in c.iter().enumerate() {
        complete(&db, vec![cj.job_ref()], now + i as i64, Retention::Keep).await;
    }
    let prune = |limit: u32, archive: bool| JobPruneParams {
        queue: q("pn"),
        state: JobState::Completed,
        finished_before: now + 3,
        limit,
        archive,
    };
    assert_eq!(db.b.job_prune(prune(2, false)).await.unwrap(), 2);
    assert_eq!(db.b.job_prune(prune(10, true)).await.unwrap(), 1);
    assert_eq!(db.b.job_prune(prune(10, false)).await.unwrap(), 0);
    let left: Vec<i64> = c.iter().map(|x| x.id).filter(|&i| i == c[3].id).collect();
    let remaining =
        db.b.job_list(JobListParams {
            queue: Some(q("pn")),
            state: None,
            kind: None,
            unique_key: None,
            after_id: 0,
            limit: 10,
            now,
        })
        .await
        .unwrap();
    assert_eq!(remaining.iter().map(|j| j.id).collect::<Vec<_>>(), left);
    assert_eq!(db.archived(c[2].id).await.as_deref(), Some("completed"));
    assert_eq!(id.len(), 4);
}

async fn leader_election(db: Db) {
    let now = db.now;
    let p = |holder: &str, at: i64| LeaderParams {
        name: "maint".into(),
        holder: holder.into(),
        now: at,
        expires_at: at + 10 * SEC,
    };
    assert_eq!(db.b.leader_elect(&p("a", now)).await.unwrap(), Some(1));
    assert_eq!(db.b.leader_elect(&p("b", now + SEC)).await.unwrap(), None);
    assert_eq!(
        db.b.leader_elect(&p("a", now + 5 * SEC)).await.unwrap(),
        Some(1),
        "renewal keeps the term"
    );
    assert_eq!(
        db.b.leader_elect(&p("b", now + 14 * SEC)).await.unwrap(),
        None,
        "a's renewed lease still holds"
    );
    assert_eq!(
        db.b.leader_elect(&p("b", now + 16 * SEC)).await.unwrap(),
        Some(2),
        "b takes over an expired lease"
    );
    assert_eq!(
        db.b.leader_elect(&p("a", now + 17 * SEC)).await.unwrap(),
        None
    );
    db.b.leader_resign("maint", "a").await.unwrap(); // not the holder: no effect
    assert_eq!(
        db.b.leader_elect(&p("a", now + 18 * SEC)).await.unwrap(),
        None
    );
    db.b.leader_resign("maint", "b").await.unwrap();
    assert_eq!(
        db.b.leader_elect(&p("a", now + 19 * SEC)).await.unwrap(),
        Some(3)
    );
    // Many contenders at once: exactly one wins.
    let mut handles = vec![];
    for i in 0..8 {
        let b = db.b.clone();
        let lp = LeaderParams {
            name: "race".into(),
            holder: format!("h{i}"),
            now,
            expires_at: now + 10 * SEC,
        };
        handles.push(tokio::spawn(
            async move { b.leader_elect(&lp).await.unwrap() },
        ));
    }
    let mut wins = 0;
    for h in handles {
        wins += h.await.unwrap().is_some() as usize;
    }
    assert_eq!(wins, 1);
}

async fn cron_ticks_fire_once(db: Db) {
    let now = db.now;
    let fire = |tick: i64| CronFireParams {
        name: "nightly".into(),
        tick,
        job: job("cron", &format!(r#"{{"tick":{tick}}}"#)),
        now,
    };
    assert!(db.b.cron_fire(fire(100)).await.unwrap().unwrap().created);
    assert!(db.b.cron_fire(fire(100)).await.unwrap().is_none());
    assert!(db.b.cron_fire(fire(50)).await.unwrap().is_none());
    assert!(db.b.cron_fire(fire(200)).await.unwrap().is_some());
    let mut handles = vec![];
    for _ in 0..8 {
        let b = db.b.clone();
        let p = fire(300);
        handles.push(tokio::spawn(async move { b.cron_fire(p).await.unwrap() }));
    }
    let mut fired = 0;
    for h in handles {
        fired += h.await.unwrap().is_some() as usize;
    }
    assert_eq!(fired, 1, "one tick fired more than once");
    let stats = db.b.queue_stats(Some(&q("cron")), now).await.unwrap();
    assert_eq!(stats[0].1.available, 3);
}

async fn topic_subscriptions(db: Db) {
    let now = db.now;
    let (t, a, b) = (q("orders"), q("billing"), q("shipping"));
    db.b.topic_subscribe(&t, &b, true, now).await.unwrap();
    db.b.topic_subscribe(&t, &a, true, now).await.unwrap();
    db.b.topic_subscribe(&t, &a, true, now).await.unwrap();
    assert_eq!(
        db.b.topic_subscribers(&t).await.unwrap(),
        vec![a.clone(), b.clone()]
    );
    db.b.topic_subscribe(&t, &b, false, now).await.unwrap();
    assert_eq!(db.b.topic_subscribers(&t).await.unwrap(), vec![a]);
    assert!(
        db.b.topic_subscribers(&q("nobody"))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn transactions_the_caller_controls(db: Db) {
    let now = db.now;
    // Enqueue inside a transaction: the job exists only if it commits.
    let mut tx = backlog_sql::JobTx::begin(db.b.as_ref()).await.unwrap();
    let rolled = tx.enqueue(vec![job("txq", "1")], now).await.unwrap()[0].id;
    tx.rollback().await.unwrap();
    assert!(db.b.job_get(rolled).await.unwrap().is_none());
    let mut tx = backlog_sql::JobTx::begin(db.b.as_ref()).await.unwrap();
    let kept = tx.enqueue(vec![job("txq", "2")], now).await.unwrap()[0].id;
    tx.commit().await.unwrap();
    assert_eq!(state_of(&db, kept).await, JobState::Available);
    // Complete in the same commit as the handler's own writes (here: a follow-up job).
    let c =
        db.b.job_claim(&claim("txq", 1, now, db.strategy()))
            .await
            .unwrap()
            .remove(0);
    let mut tx = backlog_sql::JobTx::begin(db.b.as_ref()).await.unwrap();
    let follow = tx.enqueue(vec![job("txq-out", "3")], now).await.unwrap()[0].id;
    tx.complete(JobCompleteParams {
        jobs: vec![c.job_ref()],
        now,
        retention: Retention::Keep,
    })
    .await
    .unwrap();
    assert_eq!(state_of(&db, kept).await, JobState::Completed);
    assert_eq!(state_of(&db, follow).await, JobState::Available);
    // With a stale token, the handler's writes roll back with the completion.
    let id = ids(&db, vec![job("txq", "4")], now).await[0];
    let c =
        db.b.job_claim(&claim("txq", 1, now, db.strategy()))
            .await
            .unwrap()
            .remove(0);
    assert_eq!(c.id, id);
    let stale = JobRef {
        id,
        token: c.lease_token.wrapping_add(1),
    };
    let mut tx = backlog_sql::JobTx::begin(db.b.as_ref()).await.unwrap();
    let ghost = tx.enqueue(vec![job("txq-out", "5")], now).await.unwrap()[0].id;
    let e = tx
        .complete(JobCompleteParams {
            jobs: vec![stale],
            now,
            retention: Retention::Keep,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::LeaseLost { job_id } if job_id == id),
        "{e}"
    );
    assert!(
        db.b.job_get(ghost).await.unwrap().is_none(),
        "the handler's write survived a lost lease"
    );
    assert_eq!(state_of(&db, id).await, JobState::Running);
}

fn traced(queue: &str, n: u8) -> NewJob {
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
async fn trace_context_travels_with_the_job(db: Db) {
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

harness::conformance!(
    migrate_is_idempotent_and_concurrent,
    enqueue_defaults_and_claim,
    trace_context_travels_with_the_job,
    batch_enqueue_keeps_input_order,
    unique_keys,
    unique_keys_under_concurrent_producers,
    fifo_lifo_and_priority,
    delayed_jobs_wait_for_run_at,
    paused_queues_hand_out_nothing,
    kinds_filter_claims,
    pending_counts_by_kind_and_due_time,
    completion_retention,
    complete_claim_completes_then_claims,
    one_claims_batch_is_fenced_job_by_job,
    fencing_after_lease_takeover,
    fail_retries_then_dies,
    release_and_heartbeat,
    rescue_of_last_attempt_is_dead,
    operator_actions,
    rescue_and_redrive_stay_within_their_limit,
    redrive_skips_taken_unique_keys,
    stats_and_lists,
    queue_settings_round_trip,
    schema_version_and_oldest_due,
    stats_history_and_audit,
    oldest_open_transaction,
    concurrent_claimers_never_share_a_job,
    sharded_claims_take_every_job_once,
    lowering_a_queues_shards_strands_no_job,
    shards_raised_elsewhere_are_claimed_at_once,
    claimers_of_several_processes_never_share_a_job,
    concurrent_complete_claim_loops,
    transaction_claim_mode,
    transaction_claims_in_batches,
    transaction_claim_never_stalls_others,
    heartbeat_reports_cancel_requests,
    progress_and_result,
    pruning_in_bounded_batches,
    leader_election,
    cron_ticks_fire_once,
    topic_subscriptions,
    transactions_the_caller_controls,
);

#[allow(dead_code)]
fn _unused(_: Arc<dyn Backend>) {}
