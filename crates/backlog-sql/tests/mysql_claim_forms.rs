//! MySQL/MariaDB claims in their two-step form (`job_claim_twostep_*.sql`: candidates read
//! without locking, then locked by primary key), which a process takes on its own after a slow
//! locking claim (`ClaimShape` in `src/mysql.rs`). The conformance suite runs the locking form;
//! here the two-step form is forced and must keep what a claim promises: the order of each
//! queue (priority, then FIFO or LIFO), global concurrency, no job claimed twice by claimers
//! racing on the same head, and transaction claims that hold their rows.
#![cfg(feature = "servers")]

#[allow(dead_code, unused_macros, unused_imports)]
mod harness;

use std::collections::HashSet;
use std::time::Duration;

use backlog_core::{
    Backend, ClaimStrategy, JobClaimParams, JobInsertParams, NewJob, Ordering, Payload, QueueName,
    QueueSettings,
};
use backlog_sql::{BackendConfig, MySqlBackend};

const FOREVER: Duration = Duration::from_secs(3600);

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

async fn backend(db: &harness::Db) -> MySqlBackend {
    let b = MySqlBackend::connect(&db.url, &BackendConfig::default())
        .await
        .unwrap();
    b.two_step_claims(FOREVER);
    b
}

/// Enqueues one job a priority, in order, and returns their ids.
async fn enqueue(b: &dyn Backend, queue: &str, priorities: &[i16]) -> Vec<i64> {
    let jobs = (priorities.iter())
        .map(|&p| {
            let mut j = NewJob::new(q(queue), Payload::parse("{}", 1024).unwrap());
            j.priority = p;
            j
        })
        .collect();
    let now = backlog_core::now_micros();
    let out = b.job_insert(JobInsertParams { jobs, now }).await.unwrap();
    out.iter().map(|o| o.id).collect()
}

fn claim(queue: &str, limit: u32, order: Ordering) -> JobClaimParams {
    JobClaimParams {
        queue: q(queue),
        kinds: vec![],
        limit,
        owner: "two-step".into(),
        lease: Duration::from_secs(60),
        now: backlog_core::now_micros(),
        order,
        strategy: ClaimStrategy::SkipLocked,
        global_limit: false,
    }
}

async fn claimed_ids(b: &dyn Backend, p: &JobClaimParams) -> Vec<i64> {
    b.job_claim(p).await.unwrap().iter().map(|j| j.id).collect()
}

#[tokio::test]
async fn two_step_claims_keep_priority_and_fifo_or_lifo() {
    let db = harness::Db::mysql().await;
    let b = backend(&db).await;
    let ids = enqueue(&b, "fifo", &[1, 1, 0, 0]).await;
    let got = claimed_ids(&b, &claim("fifo", 3, Ordering::Fifo)).await;
    assert_eq!(
        got,
        vec![ids[2], ids[3], ids[0]],
        "priority 0 first, then FIFO"
    );
    assert_eq!(
        claimed_ids(&b, &claim("fifo", 3, Ordering::Fifo)).await,
        vec![ids[1]]
    );

    let mut s = QueueSettings::defaults(q("lifo"));
    s.order = Ordering::Lifo;
    b.queue_upsert(&s, backlog_core::now_micros())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        // Distinct due times: LIFO orders by run_at, then id.
        ids.extend(enqueue(&b, "lifo", &[0]).await);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let got = claimed_ids(&b, &claim("lifo", 2, Ordering::Lifo)).await;
    assert_eq!(got, vec![ids[2], ids[1]], "the newest first");
    db.cleanup().run().await;
}

#[tokio::test]
async fn two_step_claims_keep_the_global_concurrency_limit() {
    let db = harness::Db::mysql().await;
    let b = backend(&db).await;
    let mut s = QueueSettings::defaults(q("limited"));
    s.global_concurrency = Some(2);
    b.queue_upsert(&s, backlog_core::now_micros())
        .await
        .unwrap();
    let ids = enqueue(&b, "limited", &[0; 5]).await;
    let mut p = claim("limited", 10, Ordering::Fifo);
    p.global_limit = true;
    assert_eq!(claimed_ids(&b, &p).await, ids[..2].to_vec());
    assert!(claimed_ids(&b, &p).await.is_empty(), "the limit is full");
    db.cleanup().run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_step_claimers_racing_on_one_head_never_share_a_job() {
    let db = harness::Db::mysql().await;
    let a = backend(&db).await;
    let b = backend(&db).await;
    let ids: HashSet<i64> = enqueue(&a, "race", &[0; 2_000]).await.into_iter().collect();
    let drain = |b: MySqlBackend| async move {
        let mut got = Vec::new();
        loop {
            let batch = claimed_ids(&b, &claim("race", 25, Ordering::Fifo)).await;
            if batch.is_empty() {
                return got;
            }
            got.extend(batch);
        }
    };
    let (mut all, more) = tokio::join!(tokio::spawn(drain(a)), tokio::spawn(drain(b)));
    let (all, more) = (all.as_mut().unwrap(), more.unwrap());
    assert!(!all.is_empty() && !more.is_empty(), "both claimed");
    let n = all.len() + more.len();
    all.extend(more);
    let claimed: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(claimed.len(), n, "a job claimed twice");
    assert_eq!(claimed, ids, "every job claimed once");
    db.cleanup().run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_step_transaction_claim_holds_its_rows() {
    let db = harness::Db::mysql().await;
    let b = backend(&db).await;
    let ids = enqueue(&b, "tx", &[0, 0, 0]).await;
    let held = (b.job_claim_tx(&claim("tx", 2, Ordering::Fifo)).await)
        .unwrap()
        .expect("jobs");
    let held_ids: Vec<i64> = held.jobs().iter().map(|j| j.id).collect();
    assert_eq!(held_ids, ids[..2].to_vec());
    // Another claimer passes over the locked rows.
    let other = backend(&db).await;
    assert_eq!(
        claimed_ids(&other, &claim("tx", 3, Ordering::Fifo)).await,
        vec![ids[2]]
    );
    held.rollback().await.unwrap();
    // The rolled-back claim's process claims them again at once (its rollback rewound its
    // cursors; `other`'s cursor is past them until its next full pass).
    assert_eq!(
        claimed_ids(&b, &claim("tx", 3, Ordering::Fifo)).await,
        ids[..2].to_vec(),
        "rolled back: available again"
    );
    db.cleanup().run().await;
}
