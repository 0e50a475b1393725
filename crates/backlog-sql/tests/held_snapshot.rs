//! A claim's cost does not grow with what a held snapshot keeps (issue 43).
//!
//! Another session holds a snapshot that read the job table (a `REPEATABLE READ` report,
//! `pg_dump`, MariaDB's `START TRANSACTION WITH CONSISTENT SNAPSHOT`) while 200,000 jobs are
//! enqueued, claimed and completed. Vacuum (InnoDB: purge) may remove none of the versions they
//! leave, so a claim from the head of the claim index walks past every one of them. The claim
//! from this process's cursor must cost under a fixed bound whatever came before. The test also
//! shows that the snapshot did hold the versions: on PostgreSQL the claim from the head must
//! have grown far past the bound (a claim without a cursor, as before, fails); on MariaDB,
//! where a claim reads its candidates without locking and a plain read steps over delete-marked
//! entries cheaply, the head stays near the bound too, and InnoDB's history list (what purge
//! may not remove) must hold the undo logs of every claim and completion.
//!
//! Work is counted, not timed: buffers (`EXPLAIN (ANALYZE, BUFFERS)`) on PostgreSQL, InnoDB
//! pages accessed (`ANALYZE FORMAT=JSON`) on MySQL/MariaDB, whose `Handler_read_*` counters do
//! not see delete-marked records. SQLite is not here: it rewrites rows in place and keeps an old
//! snapshot in its WAL, so nothing piles up in its index (SOAK.md: flat under a held read).
#![cfg(feature = "servers")]

#[allow(dead_code, unused_macros, unused_imports)]
mod harness;

use std::time::{Duration, Instant};

use backlog_core::{
    Backend, ClaimStrategy, JobClaimParams, JobCompleteParams, JobInsertParams, JobRef, NewJob,
    Ordering, Payload, QueueName, Retention,
};
use backlog_sql::{BackendConfig, ClaimCost, MySqlBackend, PgBackend};
use sqlx::Connection;

/// Jobs completed while the snapshot is held.
const COMPLETED: usize = 200_000;
/// Jobs a measured claim takes.
const CLAIM: u32 = 100;
/// PostgreSQL: the most buffers a claim of 100 from the cursor may need. It needs about 1,030
/// after 1,000 jobs (a new version and its index entries a job) and 1,320 after 200,000; the
/// claim from the head then needs about 5,350.
const PG_BOUND: u64 = 1_800;
/// MySQL/MariaDB: the most pages a claim of 100 from the cursor may access. The cursor needs
/// about 200 after 1,000 jobs and 310 after 200,000. From the head, the locking read claims
/// made before the two-step claim needed 2,200, then about 600,000; the two-step claim about
/// 2,000 after 200,000.
const MY_BOUND: u64 = 3_000;

fn queue() -> QueueName {
    QueueName::new("held").unwrap()
}

/// Enqueues `n` jobs of the queue.
async fn enqueue(b: &dyn Backend, n: usize) {
    let payload = Payload::parse("{}", 1024).unwrap();
    let jobs = vec![NewJob::new(queue(), payload); n];
    let now = backlog_core::now_micros();
    b.job_insert(JobInsertParams { jobs, now }).await.unwrap();
}

/// Claims and completes (deleting) `n` jobs, 1,000 a claim, the queue's whole backlog.
async fn drain(b: &dyn Backend, n: usize) {
    let mut done = 0;
    while done < n {
        let now = backlog_core::now_micros();
        let claimed = (b.job_claim(&JobClaimParams {
            queue: queue(),
            kinds: vec![],
            limit: 1_000,
            owner: "held-snapshot".into(),
            lease: Duration::from_secs(60),
            now,
            order: Ordering::Fifo,
            strategy: ClaimStrategy::SkipLocked,
            global_limit: false,
        }))
        .await
        .unwrap();
        assert!(
            !claimed.is_empty(),
            "{done} of {n} done, and no job left to claim"
        );
        let jobs: Vec<JobRef> = (claimed.iter())
            .map(|j| JobRef {
                id: j.id,
                token: j.lease_token,
            })
            .collect();
        let completed = (b.job_complete(JobCompleteParams {
            jobs,
            now,
            retention: Retention::Delete,
        }))
        .await
        .unwrap();
        assert_eq!(
            completed.len(),
            claimed.len(),
            "every claimed job completes"
        );
        done += claimed.len();
    }
}

/// Enqueues and completes `COMPLETED` jobs in rounds, then queues `CLAIM` × 10 more, and
/// returns the claim's cost before (1,000 completed) and after.
async fn churn<F, Fut>(b: &dyn Backend, cost: F) -> (ClaimCost, ClaimCost)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ClaimCost>,
{
    let started = Instant::now();
    enqueue(b, 1_000).await;
    drain(b, 1_000).await;
    enqueue(b, CLAIM as usize * 10).await;
    let before = cost().await;
    drain(b, CLAIM as usize * 10).await;
    let round = 10_000;
    for _ in 0..COMPLETED / round {
        enqueue(b, round).await;
        drain(b, round).await;
    }
    enqueue(b, CLAIM as usize * 10).await;
    let after = cost().await;
    eprintln!(
        "held snapshot: claim of {CLAIM} after 1,000 completed: {before:?}; after {COMPLETED} \
         more: {after:?} ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    (before, after)
}

fn check(before: ClaimCost, after: ClaimCost, bound: u64, unit: &str) {
    assert!(
        before.cursor <= bound && after.cursor <= bound,
        "a claim from the cursor needed {} {unit} after 1,000 jobs and {} after {COMPLETED} \
         under the held snapshot (bound {bound})",
        before.cursor,
        after.cursor
    );
}

/// The snapshot kept what the test churned: else it shows nothing.
fn check_kept(kept: u64, want: u64, what: &str) {
    assert!(
        kept >= want,
        "{what} was {kept} after {COMPLETED} jobs (want at least {want}): the snapshot did not \
         keep their versions, so this test shows nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_claim_cost_does_not_grow_under_a_held_snapshot() {
    let db = harness::Db::postgres().await;
    let b = PgBackend::connect(&db.url, &BackendConfig::default())
        .await
        .unwrap();
    let mut holder = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut holder)
        .await
        .unwrap();
    sqlx::query("SELECT count(*) FROM backlog_job")
        .execute(&mut holder)
        .await
        .unwrap();
    let (before, after) = churn(&b, || async { b.claim_cost("held", CLAIM).await.unwrap() }).await;
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    check(before, after, PG_BOUND, "buffers");
    check_kept(
        after.full_pass,
        2 * PG_BOUND,
        "the claim from the head, in buffers,",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_claim_cost_does_not_grow_under_a_held_snapshot() {
    let db = harness::Db::mysql().await;
    let b = MySqlBackend::connect(&db.url, &BackendConfig::default())
        .await
        .unwrap();
    let mut holder = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    sqlx::query("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .execute(&mut holder)
        .await
        .unwrap();
    sqlx::query("SELECT count(*) FROM backlog_job")
        .execute(&mut holder)
        .await
        .unwrap();
    let (before, after) = churn(&b, || async { b.claim_cost("held", CLAIM).await.unwrap() }).await;
    let (history,): (i64,) = sqlx::query_as(
        "SELECT CAST(count AS SIGNED) FROM information_schema.INNODB_METRICS \
         WHERE name = 'trx_rseg_history_len'",
    )
    .fetch_one(&mut holder)
    .await
    .unwrap();
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    check(before, after, MY_BOUND, "pages");
    // An undo log a transaction that changed rows: each claim of 1,000 and its completion.
    check_kept(
        history as u64,
        2 * COMPLETED as u64 / 1_000,
        "InnoDB's history list length",
    );
}
