//! PostgreSQL: a plan made while the job table was empty stays a plan for a few rows once the
//! table holds many (issue 19, "plans that cannot go bad"). backlog's connections keep generic
//! plans for their whole life; after a `VACUUM` of an empty table the planner takes the table for
//! one row, and the claim's generic plan then read and sorted the whole table and joined it back
//! row by row on every claim (docs/explain.md, "Plans made on an empty table"). Here a worker
//! starts on an empty, freshly vacuumed table, so its first claims plan on those statistics; then
//! 20,000 jobs arrive and it drains them. No statement may scan the table: the server's own count
//! of sequential scans on `backlog_job` stays where it was, and the index entries read stay a few
//! per job (a plan that walks the whole table per claim reads thousands per job).
//! `backlog bench --overload 1000000` (which starts the same way) is the million-job run.
#![cfg(feature = "servers")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog::{Client, QueueName, QueueSettings, Retention};
use common::{CountingWorker, Engine, TestDb};

const JOBS: u64 = 20_000;

/// The server's counts for `backlog_job`: sequential scans, and rows fetched through indexes.
async fn scans(db: &TestDb) -> (i64, i64) {
    let seq = db
        .scalar(
            "SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables \
             WHERE relid = to_regclass('backlog_job')",
        )
        .await;
    let fetched = db
        .scalar(
            "SELECT coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables \
             WHERE relid = to_regclass('backlog_job')",
        )
        .await;
    (seq, fetched)
}

/// The counts once every backend has reported its statistics (an idle backend reports within a
/// second or so): two equal readings a second and a half apart.
async fn settled_scans(db: &TestDb) -> (i64, i64) {
    let started = Instant::now();
    let mut last = scans(db).await;
    loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = scans(db).await;
        if now == last || started.elapsed() > Duration::from_secs(20) {
            return now;
        }
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_on_an_empty_vacuumed_table_never_scans_it() {
    let db = TestDb::new(Engine::Postgres).await;
    let client = Arc::new(Client::connect(&db.url).await.unwrap());
    let mut s = QueueSettings::defaults(QueueName::new("plans").unwrap());
    s.retention = Retention::Delete;
    client.queue_configure(&s).await.unwrap();
    // Some rows come and go first, so that the vacuum leaves the statistics of an emptied table
    // (no pages, no rows) rather than those of one never vacuumed.
    let ids: Vec<_> = (0..1000)
        .map(|i| client.new_job("warm", &i).unwrap())
        .collect();
    client.enqueue_many(ids).await.unwrap();
    db.exec("DELETE FROM backlog_job").await;
    db.exec("VACUUM ANALYZE backlog_job").await;
    assert_eq!(
        db.scalar("SELECT reltuples::bigint FROM pg_class WHERE oid = 'backlog_job'::regclass")
            .await,
        0,
        "the planner is to see an empty table"
    );

    drain_never_scans(&db, &client).await;
    db.drop_db().await;
}

/// The same after a compaction (`backlog_job_compact`, schema version 14), which the leader
/// runs while another session's snapshot keeps the dead rows: the table is emptied by
/// `TRUNCATE` (`relpages = 0`, `reltuples = -1`, every cached plan made again) and refilled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_keeps_its_plans_through_a_compaction() {
    let db = TestDb::new(Engine::Postgres).await;
    let client = Arc::new(Client::connect(&db.url).await.unwrap());
    let mut s = QueueSettings::defaults(QueueName::new("plans").unwrap());
    s.retention = Retention::Delete;
    client.queue_configure(&s).await.unwrap();
    let jobs: Vec<_> = (0..1000)
        .map(|i| client.new_job("warm", &i).unwrap())
        .collect();
    client.enqueue_many(jobs).await.unwrap();
    db.exec("DELETE FROM backlog_job WHERE id % 2 = 0").await;
    assert_eq!(
        db.scalar("SELECT backlog_job_compact(10000, 1000)").await,
        500,
        "the compaction kept the 500 rows left"
    );
    db.exec("DELETE FROM backlog_job").await;
    drain_never_scans(&db, &client).await;
    db.drop_db().await;
}

/// Starts a worker on the (empty) queue `plans`, lets it plan its claims, then drains
/// [`JOBS`] jobs: no statement may scan the whole table, and index reads stay a few per job.
async fn drain_never_scans(db: &TestDb, client: &Arc<Client>) {
    // The migration read `backlog_job` whole 12 times (its ALTERs and data moves on the empty
    // table), on a connection of the test database's own pool, which stays open and idle. A
    // backend reports its counts at most once a second and puts the report off while the shared
    // entry is busy (PostgreSQL 15: up to 60 s), so under load those 12 reads could reach the
    // counts after `before` below, and once did in CI ("12 sequential scans"). A backend that
    // exits reports everything first: close the pool, so that `before` holds them.
    db.client.close().await;
    // The leader runs every task at its default cadence: its prune pass lists the queues with
    // their pending counts and its per-minute sample reads every queue's counts, both from the
    // counts the database keeps (schema version 19), not the jobs.
    let worker = CountingWorker::start(client, "plans", 100);
    // The worker's claim loops poll the empty queue: their connections plan the claim now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = settled_scans(db).await;

    for from in (0..JOBS).step_by(1000) {
        let jobs: Vec<_> = (from..from + 1000)
            .map(|i| client.new_job("plans", &i).unwrap())
            .collect();
        client.enqueue_many(jobs).await.unwrap();
    }
    let started = Instant::now();
    while worker.ran() < JOBS {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the worker ran {} of {JOBS} jobs in 5 minutes",
            worker.ran()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ran = worker.ran();
    worker.stop().await;
    let after = settled_scans(db).await;

    assert_eq!(ran, JOBS, "each job ran once");
    assert_eq!(
        after.0 - before.0,
        0,
        "a statement scanned the whole job table while the worker drained it"
    );
    let per_job = (after.1 - before.1) as f64 / JOBS as f64;
    assert!(
        per_job < 20.0,
        "{per_job:.1} rows fetched through indexes per job: a plan walks the table"
    );
}

/// The settings that keep plans safe, on every connection of backlog's pool: generic plans, no
/// sequential scans, no bitmap scans (which return rows out of index order: a claim's generic
/// plan made on statistics that took its queue for one row read the whole queue and sorted it,
/// on every claim), and no JIT (a disabled scan's cost would otherwise set off JIT compiling,
/// 300-400 ms for a statement that runs in 0.1 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlogs_connections_keep_safe_plans() {
    let db = TestDb::new(Engine::Postgres).await;
    let client = Client::connect(&db.url).await.unwrap();
    let Some(backlog::SqlBackend::Postgres(b)) = client.sql() else {
        panic!("a PostgreSQL backend");
    };
    for (setting, want) in [
        ("plan_cache_mode", "force_generic_plan"),
        ("enable_seqscan", "off"),
        ("enable_bitmapscan", "off"),
        ("jit", "off"),
    ] {
        let got: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SHOW {setting}")))
            .fetch_one(b.pool())
            .await
            .unwrap();
        assert_eq!(got, want, "{setting}");
    }
    client.close().await;
    db.drop_db().await;
}

/// A completion-and-claim statement waits on a row lock 50 ms at most (`lock_timeout`, set for
/// its own transaction), and the library runs it again a few times before the error comes back:
/// two claimers that each met a row the other was deleting used to hold each other for the
/// server's `deadlock_timeout` (1 s) before one gave way. A row held by another session for good
/// now costs the call well under a second, changes nothing, and is a transient error; once the
/// row is free the same call goes through. The setting does not outlive the statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_held_up_by_a_row_lock_gives_way_quickly_and_changes_nothing() {
    use backlog::{ClaimOpts, DbErrorKind, Error, JobState};
    use sqlx::Connection;

    let db = TestDb::new(Engine::Postgres).await;
    let client = Client::connect(&db.url).await.unwrap();
    let mut s = QueueSettings::defaults(QueueName::new("waits").unwrap());
    s.retention = Retention::Delete;
    client.queue_configure(&s).await.unwrap();
    let jobs = (0..3)
        .map(|i| client.new_job("waits", &i).unwrap())
        .collect();
    client.enqueue_many(jobs).await.unwrap();
    let opts = ClaimOpts::new("waits").unwrap().limit(1);
    let first = client.claim(&opts).await.unwrap();
    assert_eq!(first.len(), 1);

    // Another session holds the claimed job's row (as a claimer that reached it would).
    let mut holder = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut held = holder.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM backlog_job WHERE id = $1 FOR UPDATE")
        .bind(first[0].id)
        .execute(&mut *held)
        .await
        .unwrap();
    let started = Instant::now();
    let call = client.complete_claim(&first, &opts);
    let err = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call waited on the row lock instead of giving way")
        .unwrap_err();
    let waited = started.elapsed();
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DbErrorKind::LockTimeout,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_transient(), "{err}");
    assert!(waited < Duration::from_secs(3), "waited {waited:?}");
    // Nothing changed: the job still runs under its lease, the other two still wait.
    assert_eq!(
        client.job(first[0].id).await.unwrap().state,
        JobState::Running
    );
    let waiting = db
        .scalar("SELECT count(*) FROM backlog_job WHERE queue = 'waits' AND state = 'available'")
        .await;
    assert_eq!(waiting, 2);

    held.rollback().await.unwrap();
    let r = client.complete_claim(&first, &opts).await.unwrap();
    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].id, first[0].id);
    assert_eq!(r.claimed.unwrap().len(), 1);
    // backlog's pooled connections keep the server's own lock_timeout.
    let Some(backlog::SqlBackend::Postgres(b)) = client.sql() else {
        panic!("a PostgreSQL backend");
    };
    let got: String = sqlx::query_scalar("SHOW lock_timeout")
        .fetch_one(b.pool())
        .await
        .unwrap();
    assert_eq!(got, "0");
    client.close().await;
    db.drop_db().await;
}

/// The server's counts of rows updated and deleted in `backlog_job`, once every backend has
/// reported them (two equal readings a second and a half apart).
async fn settled_writes(db: &TestDb) -> (i64, i64) {
    let read = async || {
        let q = |col: &str| {
            format!(
                "SELECT coalesce({col}, 0) FROM pg_stat_user_tables \
                 WHERE relid = to_regclass('backlog_job')"
            )
        };
        (
            db.scalar(&q("n_tup_upd")).await,
            db.scalar(&q("n_tup_del")).await,
        )
    };
    let started = Instant::now();
    let mut last = read().await;
    loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = read().await;
        if now == last || started.elapsed() > Duration::from_secs(20) {
            return now;
        }
        last = now;
    }
}

/// In transaction claim mode (the runtime's default on PostgreSQL) a job whose handler ends in
/// its first poll costs its row one write: the claim only locks it, and the commit that ends
/// the claim deletes it. Claimed under a lease, the same jobs are each updated once (the claim)
/// before their delete: the counts the server keeps tell the two apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_that_end_at_once_cost_their_row_one_write() {
    use backlog::{DrainMode, Outcome, Worker};

    const N: i64 = 2000;
    let db = TestDb::new(Engine::Postgres).await;
    for claim_in_transaction in [true, false] {
        let before = settled_writes(&db).await;
        // A client of its own, closed after the drain: its sessions report their counts as
        // they end.
        let client = Arc::new(Client::connect(&db.url).await.unwrap());
        let mut s = QueueSettings::defaults(QueueName::new("once").unwrap());
        s.retention = Retention::Delete;
        client.queue_configure(&s).await.unwrap();
        let jobs = (0..N)
            .map(|i| client.new_job("once", &i).unwrap())
            .collect();
        client.enqueue_many(jobs).await.unwrap();
        let report = Worker::builder(client.clone())
            .queue("once", 100)
            .fallback_handler(|_| async { Ok(Outcome::Complete) })
            .configure(move |c| {
                c.maintenance = None;
                c.drain = Some(DrainMode::All);
                c.claim_in_transaction = claim_in_transaction;
                // Every job is polled in its claim's loop, however slow a loaded machine makes
                // the debug build: the 1 ms default ran out under a busy CI run, and the jobs
                // not polled in time went to lease claims (112 rows updated).
                c.inline_budget = std::time::Duration::from_secs(5);
            })
            .build()
            .unwrap()
            .drain()
            .await
            .unwrap();
        assert_eq!(report.completed, N as u64, "{report:?}");
        client.close().await;
        let after = settled_writes(&db).await;
        let (updated, deleted) = (after.0 - before.0, after.1 - before.1);
        assert_eq!(deleted, N, "each job deleted once");
        let want = if claim_in_transaction { 0 } else { N };
        assert_eq!(
            updated, want,
            "rows updated (in transaction: {claim_in_transaction})"
        );
    }
    db.drop_db().await;
}
