#![allow(missing_docs)]
//! What the conformance suite (`crates/backlog-sql/tests/conformance/`, which runs against
//! this backend too) does not pin: wake-ups, bad input that changes nothing, the refusals a SQL
//! database's constraints make, and the determinism tests rely on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use backlog_core::*;
use backlog_memory::MemoryBackend;

const SEC: i64 = 1_000_000;
const NOW: i64 = 1_700_000_000 * SEC;

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn job(queue: &str) -> NewJob {
    NewJob::new(
        q(queue),
        Payload::parse("{}", DEFAULT_PAYLOAD_LIMIT).unwrap(),
    )
}

fn keyed(queue: &str, key: &str) -> NewJob {
    let mut j = job(queue);
    j.unique_key = Some(UniqueKey::new(key).unwrap());
    j
}

fn claim(queue: &str, limit: u32, now: i64) -> JobClaimParams {
    JobClaimParams {
        queue: q(queue),
        kinds: vec![],
        limit,
        owner: "w".into(),
        lease: Duration::from_secs(30),
        now,
        order: Ordering::Fifo,
        strategy: ClaimStrategy::SingleWriter,
        global_limit: false,
    }
}

async fn insert(b: &MemoryBackend, jobs: Vec<NewJob>, now: i64) -> Vec<i64> {
    b.job_insert(JobInsertParams { jobs, now })
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.id)
        .collect()
}

async fn all_jobs(b: &MemoryBackend) -> Vec<Job> {
    b.job_list(JobListParams {
        queue: None,
        state: None,
        kind: None,
        unique_key: None,
        after_id: 0,
        limit: 1000,
        now: NOW,
    })
    .await
    .unwrap()
}

fn constraint(r: Result<impl std::fmt::Debug>) {
    assert!(
        matches!(
            r,
            Err(Error::Database {
                kind: DbErrorKind::ConstraintViolation,
                ..
            })
        ),
        "{r:?}"
    );
}

/// A wake function that records the queues it hears of.
fn recorder() -> (WakeFn, Arc<Mutex<Vec<String>>>) {
    let heard = Arc::new(Mutex::new(vec![]));
    let h = heard.clone();
    let wake: WakeFn = Arc::new(move |queue: &str| h.lock().unwrap().push(queue.to_owned()));
    (wake, heard)
}

fn take(heard: &Mutex<Vec<String>>) -> Vec<String> {
    std::mem::take(&mut *heard.lock().unwrap())
}

#[tokio::test]
async fn listeners_hear_of_every_queue_that_gets_a_due_job() {
    let b = MemoryBackend::new();
    let (wake, heard) = recorder();
    assert!(b.listen(wake).await.unwrap());

    let mut later = job("b");
    later.run_at = Some(NOW + 60 * SEC);
    insert(&b, vec![job("a"), job("a"), later], NOW).await;
    assert_eq!(
        take(&heard),
        ["a"],
        "once per queue, not for a scheduled job"
    );

    // A release that is due wakes; a retry that is not yet due does not.
    let c = b.job_claim(&claim("a", 2, NOW)).await.unwrap();
    let release = |r: JobRef, run_at| JobReleaseParams {
        job: r,
        now: NOW,
        run_at,
    };
    b.job_release(release(c[0].job_ref(), NOW)).await.unwrap();
    assert_eq!(take(&heard), ["a"]);
    b.job_fail(JobFailParams {
        job: c[1].job_ref(),
        now: NOW,
        error: "x".into(),
        retry_at: Some(NOW + SEC),
        cancelled: false,
    })
    .await
    .unwrap();
    assert!(take(&heard).is_empty());

    // A rescued job and an operator's retry are due at once.
    let mut p = claim("a", 1, NOW);
    p.lease = Duration::from_secs(1);
    b.job_claim(&p).await.unwrap();
    let rescued = b
        .job_rescue(JobRescueParams {
            now: NOW + 2 * SEC,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(rescued.len(), 1);
    assert_eq!(take(&heard), ["a"]);
    let id = insert(&b, vec![job("c")], NOW).await[0];
    b.job_admin(id, AdminAction::Cancel, NOW).await.unwrap();
    take(&heard);
    b.job_admin(id, AdminAction::Retry, NOW).await.unwrap();
    assert_eq!(take(&heard), ["c"]);
}

#[tokio::test]
async fn a_wake_function_may_call_back_into_the_backend() {
    let b = Arc::new(MemoryBackend::new());
    let (seen, weak) = (Arc::new(Mutex::new(vec![])), Arc::downgrade(&b));
    let s = seen.clone();
    let wake: WakeFn = Arc::new(move |_: &str| {
        // The lock is let go before wake functions run: this would deadlock otherwise.
        let archived = weak.upgrade().and_then(|b| b.archived(1));
        s.lock().unwrap().push(archived.is_none());
    });
    b.listen(wake).await.unwrap();
    insert(&b, vec![job("a")], NOW).await;
    assert_eq!(*seen.lock().unwrap(), [true]);
}

#[tokio::test]
async fn a_batch_with_one_bad_job_inserts_nothing() {
    let b = MemoryBackend::new();
    let mut bad = job("a");
    bad.max_attempts = Some(0);
    constraint(
        b.job_insert(JobInsertParams {
            jobs: vec![job("a"), bad.clone()],
            now: NOW,
        })
        .await,
    );
    assert!(all_jobs(&b).await.is_empty());
    // Nor does a cron tick fire with it: the tick is still free for a good job.
    let fire = |job| CronFireParams {
        name: "nightly".into(),
        tick: 100,
        job,
        now: NOW,
    };
    constraint(b.cron_fire(fire(bad)).await);
    assert!(b.cron_fire(fire(job("a"))).await.unwrap().unwrap().created);
    // Nothing of the refused jobs was kept, not even an id.
    assert_eq!(all_jobs(&b).await[0].id, 1);
}

#[tokio::test]
async fn queue_settings_are_checked_and_kept_in_whole_milliseconds() {
    let b = MemoryBackend::new();
    let good = QueueSettings {
        backoff_base: Duration::from_micros(1_500),
        lease: Duration::from_micros(30_000_999),
        ..QueueSettings::defaults(q("s"))
    };
    let bad = [
        QueueSettings {
            max_attempts: 0,
            ..good.clone()
        },
        QueueSettings {
            lease: Duration::from_micros(999),
            ..good.clone()
        },
        QueueSettings {
            concurrency: Some(0),
            ..good.clone()
        },
        QueueSettings {
            global_concurrency: Some(0),
            ..good.clone()
        },
        QueueSettings {
            group_concurrency: 0,
            ..good.clone()
        },
        QueueSettings {
            group_rate_limit: Some(RateLimit {
                starts: 0,
                period: Duration::from_secs(1),
            }),
            ..good.clone()
        },
        QueueSettings {
            group_rate_limit: Some(RateLimit {
                starts: 1,
                period: Duration::ZERO,
            }),
            ..good.clone()
        },
        QueueSettings {
            shards: 0,
            ..good.clone()
        },
        QueueSettings {
            shards: 257,
            ..good.clone()
        },
    ];
    for s in &bad {
        constraint(b.queue_upsert(s, NOW).await);
    }
    assert_eq!(b.queue_get(&q("s")).await.unwrap(), None);
    b.queue_upsert(&good, NOW).await.unwrap();
    let stored = b.queue_get(&q("s")).await.unwrap().unwrap();
    assert_eq!(
        (stored.backoff_base, stored.lease),
        (Duration::from_millis(1), Duration::from_millis(30_000))
    );
}

#[tokio::test]
async fn progress_and_audit_details_must_be_json() {
    let b = MemoryBackend::new();
    insert(&b, vec![job("p")], NOW).await;
    let c = b.job_claim(&claim("p", 1, NOW)).await.unwrap().remove(0);
    let progress = |progress: &str| JobProgressParams {
        job: c.job_ref(),
        progress: Some(progress.into()),
        result: None,
    };
    b.job_progress(progress(r#"{"done":1}"#)).await.unwrap();
    constraint(b.job_progress(progress("{done")).await);
    let j = b.job_get(c.id).await.unwrap().unwrap();
    assert_eq!(j.progress.as_deref(), Some(r#"{"done":1}"#));

    let entry = AuditEntry {
        id: 0,
        at: NOW,
        actor: "ops".into(),
        action: "queue.pause".into(),
        queue: Some("p".into()),
        job_id: None,
        detail: "not json".into(),
    };
    assert!(matches!(
        b.audit_add(&entry).await,
        Err(Error::Database {
            kind: DbErrorKind::Other,
            ..
        })
    ));
    let list = AuditListParams::newest(10);
    assert!(b.audit_list(&list).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_operator_retry_of_a_taken_key_is_a_unique_violation() {
    let b = MemoryBackend::new();
    let old = insert(&b, vec![keyed("u", "k")], NOW).await[0];
    b.job_admin(old, AdminAction::Cancel, NOW).await.unwrap();
    let new = insert(&b, vec![keyed("u", "k")], NOW).await[0];
    assert_ne!(old, new);
    let r = b.job_admin(old, AdminAction::Retry, NOW).await;
    assert!(
        matches!(
            r,
            Err(Error::Database {
                kind: DbErrorKind::UniqueViolation,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(
        b.job_get(old).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    // Once the key is free again the retry goes through, and takes it.
    b.job_admin(new, AdminAction::Cancel, NOW).await.unwrap();
    b.job_admin(old, AdminAction::Retry, NOW).await.unwrap();
    let again = b
        .job_insert(JobInsertParams {
            jobs: vec![keyed("u", "k")],
            now: NOW,
        })
        .await
        .unwrap();
    assert_eq!(
        again[0],
        EnqueueOutcome {
            id: old,
            created: false
        }
    );
}

#[tokio::test]
async fn archived_jobs_are_read_but_never_changed() {
    let b = MemoryBackend::new();
    let id = insert(&b, vec![job("a")], NOW).await[0];
    let c = b.job_claim(&claim("a", 1, NOW)).await.unwrap();
    b.job_complete(JobCompleteParams {
        jobs: vec![c[0].job_ref()],
        now: NOW,
        retention: Retention::Archive,
    })
    .await
    .unwrap();
    assert_eq!(b.archived(id).unwrap().state, JobState::Completed);
    for r in [
        b.job_admin(id, AdminAction::Retry, NOW).await,
        b.job_cancel_request(id, NOW).await,
    ] {
        assert!(
            matches!(
                r,
                Err(Error::JobStateConflict {
                    state: JobState::Completed,
                    ..
                })
            ),
            "{r:?}"
        );
    }
    assert!(all_jobs(&b).await.is_empty());
}

#[tokio::test]
async fn claims_take_priorities_in_turn_and_skip_jobs_not_due() {
    let b = MemoryBackend::new();
    let mut jobs = vec![];
    // (priority, due in seconds)
    for (priority, due) in [(1, -3), (0, -2), (1, -1), (0, 5), (0, -4), (2, -9)] {
        let mut j = job("o");
        j.priority = priority;
        j.run_at = Some(NOW + due * SEC);
        jobs.push(j);
    }
    let id = insert(&b, jobs, NOW).await;
    let mut p = claim("o", 10, NOW);
    p.limit = 0;
    assert!(b.job_claim(&p).await.unwrap().is_empty());
    p.limit = 4;
    p.order = Ordering::Lifo;
    let got: Vec<i64> = b
        .job_claim(&p)
        .await
        .unwrap()
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(got, [id[1], id[4], id[2], id[0]]);
    let rest = b.job_claim(&claim("o", 10, NOW)).await.unwrap();
    assert_eq!(rest.iter().map(|c| c.id).collect::<Vec<_>>(), [id[5]]);
}

#[tokio::test]
async fn every_claim_has_its_own_token() {
    let b = MemoryBackend::new();
    insert(&b, (0..50).map(|_| job("t")).collect(), NOW).await;
    let mut tokens = std::collections::HashSet::new();
    for _ in 0..50 {
        let c = b.job_claim(&claim("t", 1, NOW)).await.unwrap();
        assert!(c[0].lease_token != 0 && tokens.insert(c[0].lease_token));
    }
    // The same calls on another backend give the same tokens: a test can be replayed.
    let other = MemoryBackend::new();
    insert(&other, vec![job("t")], NOW).await;
    let first = other.job_claim(&claim("t", 1, NOW)).await.unwrap();
    assert!(tokens.contains(&first[0].lease_token));
}

#[tokio::test]
async fn transaction_claims_are_unsupported() {
    let b = MemoryBackend::new();
    insert(&b, vec![job("x")], NOW).await;
    assert!(!b.capabilities().row_locks);
    assert!(matches!(
        b.job_claim_tx(&claim("x", 1, NOW)).await,
        Err(Error::Unsupported(_))
    ));
    assert_eq!(
        b.job_get(1).await.unwrap().unwrap().state,
        JobState::Available
    );
}

#[tokio::test]
async fn queues_with_jobs_but_no_settings_are_listed_with_defaults() {
    let b = MemoryBackend::new();
    insert(&b, vec![job("plain"), job("plain")], NOW).await;
    b.queue_set_paused(&q("paused"), true, NOW).await.unwrap();
    let list = b.queue_list().await.unwrap();
    let names: Vec<(&str, i64, bool)> = list
        .iter()
        .map(|i| (i.settings.name.as_str(), i.pending, i.settings.paused))
        .collect();
    assert_eq!(names, [("paused", 0, true), ("plain", 2, false)]);
    assert_eq!(b.queue_get(&q("plain")).await.unwrap(), None);
}

#[tokio::test]
async fn pruned_minutes_fold_into_minute_zero() {
    let b = MemoryBackend::new();
    let row = |minute, enqueued| StatRow {
        queue: "s".into(),
        minute,
        counts: StatCounts {
            enqueued,
            ..StatCounts::default()
        },
        depth: None,
    };
    let m = minute_of(NOW);
    b.stat_add(&[row(m, 2), row(m + 60 * SEC, 3)])
        .await
        .unwrap();
    assert_eq!(b.stat_prune(0).await.unwrap(), 0);
    assert_eq!(b.stat_prune(m + 60 * SEC).await.unwrap(), 1);
    // From minute 0 on, the history shows the folded row too, as the SQL statement does.
    let all = b.stat_history(None, 0).await.unwrap();
    let got: Vec<(i64, i64)> = all.iter().map(|r| (r.minute, r.counts.enqueued)).collect();
    assert_eq!(got, [(0, 2), (m + 60 * SEC, 3)]);
}

#[tokio::test]
async fn debug_output_counts_jobs_instead_of_printing_them() {
    let b = MemoryBackend::new();
    insert(&b, (0..3).map(|_| job("d")).collect(), NOW).await;
    let shown = format!("{b:?}");
    assert!(
        shown.contains("jobs: 3") && !shown.contains("payload"),
        "{shown}"
    );
}

mod transactions;
