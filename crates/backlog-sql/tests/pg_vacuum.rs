//! PostgreSQL: the leader's `job_vacuum` reclaims the dead rows that completed jobs leave in the
//! job table once enough have piled up, so the table's space is reused rather than grown, even
//! with autovacuum off (as on the CI database); and when another session's snapshot keeps them
//! past the `VACUUM`, it compacts the table (`backlog_job_compact`), keeping every job as it was,
//! unless a session that may read the table holds it.
#![cfg(feature = "servers")]

// The conformance suite's harness: this test uses its PostgreSQL schema only.
#[allow(dead_code, unused_macros, unused_imports)]
mod harness;

use std::time::{Duration, Instant};

use backlog_core::{
    Backend, ClaimStrategy, JobClaimParams, JobCompleteParams, JobVacuumParams, JobVacuumed,
    Ordering, QueueName, Retention,
};
use sqlx::{Connection, PgConnection};

/// The tests of this file one at a time: a held snapshot holds the horizon of the whole
/// database, which the other test's VACUUM must be free of.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The leader's settings, with `min_dead` dead rows tolerated and compaction of at most
/// `compact_max_live` rows.
fn params(min_dead: u64, compact_max_live: u64) -> JobVacuumParams {
    JobVacuumParams {
        min_dead,
        compact_max_live,
        compact_lock_wait: Duration::from_millis(20),
        done_period: Duration::from_secs(7200),
    }
}

/// Inserts and deletes `n` rows with plain SQL on a connection of its own, closed afterwards
/// (a closing backend reports its statistics at once).
async fn churn(url: &str, n: i64) {
    let mut c = PgConnection::connect(url).await.unwrap();
    sqlx::query(
        "INSERT INTO backlog_job (queue, payload) \
         SELECT 'churn', jsonb_build_object('i', i) FROM generate_series(1, $1) AS i",
    )
    .bind(n)
    .execute(&mut c)
    .await
    .unwrap();
    sqlx::query("DELETE FROM backlog_job WHERE queue = 'churn'")
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
}

/// Calls `job_vacuum` until it vacuums (statistics arrive within a second or so).
async fn vacuum_when_due(b: &dyn Backend, min_dead: u64) -> u64 {
    vacuumed_when_due(b, params(min_dead, 0)).await.dead
}

/// Calls `job_vacuum` until it vacuums, and says what it did.
async fn vacuumed_when_due(b: &dyn Backend, p: JobVacuumParams) -> JobVacuumed {
    let started = Instant::now();
    loop {
        if let Some(done) = b.job_vacuum(p).await.unwrap() {
            return done;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "job_vacuum never found the dead rows"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn table_bytes(c: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT pg_relation_size('backlog_job')")
        .fetch_one(c)
        .await
        .unwrap()
}

async fn dead_rows(c: &mut PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT coalesce(n_dead_tup, 0) FROM pg_stat_all_tables \
         WHERE relid = to_regclass('backlog_job')",
    )
    .fetch_one(c)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_rows_are_vacuumed_once_enough_pile_up() {
    let _serial = SERIAL.lock().await;
    // A schema of its own (the harness's), so other tests' rows do not count.
    let db = harness::Db::postgres().await;
    let (b, url) = (&*db.b, db.url.clone());
    let mut c = PgConnection::connect(&url).await.unwrap();

    // A fresh table: nothing to do.
    let none = b.job_vacuum(params(0, 10_000)).await.unwrap();
    assert_eq!(none, None, "an empty table is left alone");

    churn(&url, 20_000).await;
    // Below the threshold (min_dead plus a tenth of the live rows), the rows stay dead.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let left = b.job_vacuum(params(50_000, 10_000)).await.unwrap();
    assert_eq!(
        left, None,
        "20,000 dead rows are under a threshold of 50,000"
    );
    assert!(dead_rows(&mut c).await >= 20_000);

    let found = vacuum_when_due(b, 10_000).await;
    assert!(found >= 20_000, "it vacuumed on seeing {found} dead rows");
    assert_eq!(dead_rows(&mut c).await, 0, "VACUUM left no dead rows");
    let after_first = table_bytes(&mut c).await;
    assert_eq!(
        b.job_vacuum(params(10_000, 10_000)).await.unwrap(),
        None,
        "nothing left to vacuum"
    );

    // The same churn again reuses the reclaimed space instead of growing the table.
    churn(&url, 20_000).await;
    vacuum_when_due(b, 10_000).await;
    let after_second = table_bytes(&mut c).await;
    assert!(
        after_second <= after_first + after_first / 10,
        "the table grew from {after_first} to {after_second} bytes"
    );
}

/// A backend of its own for what follows a compaction, the one that compacted closed. The
/// compaction's statistics (a `TRUNCATE`: no dead rows) reach the server when its connection
/// next reports, which may be after later deletions were counted, and erase them; a connection
/// reports as it closes.
async fn after_a_compaction(db: &harness::Db, b: &dyn Backend) -> std::sync::Arc<dyn Backend> {
    b.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    db.connect_again().await
}

/// Every row of the job table, as JSON, in id order.
async fn rows(c: &mut PgConnection) -> Vec<String> {
    sqlx::query_scalar("SELECT row_to_json(j)::text FROM backlog_job j ORDER BY id")
        .fetch_all(c)
        .await
        .unwrap()
}

/// Another session's open `REPEATABLE READ` transaction that read `table`: its snapshot holds
/// the horizon, and its lock the table it read, until the connection is dropped.
async fn hold_snapshot(url: &str, table: &str) -> PgConnection {
    let mut c = PgConnection::connect(url).await.unwrap();
    let sql = format!("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM {table}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut c)
        .await
        .unwrap();
    held_a_while().await;
    c
}

/// Waits until a transaction opened now has held the horizon long enough for the leader to
/// take it for what keeps the dead rows (`HORIZON_HELD_FOR`, 1 s, in src/postgres.rs).
async fn held_a_while() {
    tokio::time::sleep(Duration::from_millis(1200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_snapshot_cannot_keep_dead_rows() {
    let _serial = SERIAL.lock().await;
    let db = harness::Db::postgres().await;
    let (b, url) = (&*db.b, db.url.clone());
    let mut c = PgConnection::connect(&url).await.unwrap();
    let queue = QueueName::new("kept").unwrap();
    // Jobs in every state, with what each may carry: available (a unique key, a group, a
    // payload), running (claimed below, with a lease token), held, dead, cancelled, completed
    // and kept, and due tomorrow.
    sqlx::raw_sql(
        "INSERT INTO backlog_job (queue, kind, payload, state, priority, run_at, unique_key, \
             group_key, attempt, errors, result, finished_at) VALUES \
         ('kept', 'k', '{\"a\": 1}', 'available', 0, 1, 'u1', NULL, 0, '[]', NULL, NULL), \
         ('kept', 'k', '{\"a\": 2}', 'available', 0, 2, NULL, 'g', 0, '[]', NULL, NULL), \
         ('kept', 'k', '{}', 'available', 0, 3, NULL, NULL, 0, '[]', NULL, NULL), \
         ('kept', 'k', '{}', 'held', 0, 4, 'u2', NULL, 0, '[]', NULL, NULL), \
         ('kept', 'k', '{}', 'dead', 0, 5, NULL, NULL, 3, '[\"boom\"]', NULL, 9), \
         ('kept', 'k', '{}', 'cancelled', 0, 6, NULL, NULL, 1, '[]', NULL, 9), \
         ('kept', 'k', '{}', 'completed', 0, 7, NULL, NULL, 1, '[]', '{\"ok\": 1}', 9), \
         ('kept', 'k', '{}', 'available', 0, 9999999999999999, NULL, NULL, 0, '[]', NULL, NULL)",
    )
    .execute(&mut c)
    .await
    .unwrap();
    let claim = |limit| JobClaimParams {
        queue: queue.clone(),
        kinds: vec![],
        limit,
        owner: "compact".into(),
        lease: Duration::from_secs(600),
        now: backlog_core::now_micros(),
        order: Ordering::Fifo,
        strategy: ClaimStrategy::SkipLocked,
        global_limit: false,
    };
    let running = b.job_claim(&claim(1)).await.unwrap();
    assert_eq!(running.len(), 1);
    let before = rows(&mut c).await;

    // A report over another table holds the horizon, not the job table.
    let report = hold_snapshot(&url, "backlog_queue").await;
    churn(&url, 30_000).await;
    let done = vacuumed_when_due(b, params(10_000, 10_000)).await;
    assert!(
        done.kept >= 20_000,
        "the snapshot kept the dead rows: {done:?}"
    );
    assert_eq!(done.compacted, Some(8), "the 8 jobs were kept: {done:?}");
    assert_eq!(rows(&mut c).await, before, "every job is as it was");
    assert!(
        table_bytes(&mut c).await <= 8192,
        "the dead rows' pages are gone"
    );

    // An application session idle in a transaction that wrote another table holds the horizon
    // by its transaction id, and no lock on the job table.
    report.close().await.unwrap();
    let fresh = after_a_compaction(&db, b).await;
    let b = &*fresh;
    let mut idle = PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("BEGIN; INSERT INTO backlog_cron (name, last_tick) VALUES ('idle', 1)")
        .execute(&mut idle)
        .await
        .unwrap();
    held_a_while().await;
    churn(&url, 30_000).await;
    let done = vacuumed_when_due(b, params(10_000, 10_000)).await;
    assert!(
        done.kept >= 20_000,
        "the transaction kept the dead rows: {done:?}"
    );
    assert_eq!(done.compacted, Some(8), "{done:?}");
    assert_eq!(rows(&mut c).await, before, "every job is as it was");
    let report = idle;

    // The jobs work on: the running one (the head, unique key u1) completes under its lease
    // token, the held job's unique key is still taken, the group's job and the other due one
    // are claimed.
    let jobs = running.iter().map(|j| j.job_ref()).collect();
    let now = backlog_core::now_micros();
    let completed = (b.job_complete(JobCompleteParams {
        jobs,
        now,
        retention: Retention::Delete,
    }))
    .await
    .unwrap();
    assert_eq!(completed.len(), 1, "the lease token still fences its job");
    let taken = sqlx::query("INSERT INTO backlog_job (queue, unique_key) VALUES ('kept', 'u2')")
        .execute(&mut c)
        .await;
    assert!(
        taken.is_err(),
        "the held job's unique key u2 is still taken"
    );
    let claimed = b.job_claim(&claim(10)).await.unwrap();
    assert_eq!(claimed.len(), 2, "the other due jobs: {claimed:?}");

    // A snapshot that read the job table may read it again: the table is left alone, at once.
    let fresh = after_a_compaction(&db, b).await;
    let b = &*fresh;
    let dump = hold_snapshot(&url, "backlog_job").await;
    let before = rows(&mut c).await;
    churn(&url, 30_000).await;
    let started = Instant::now();
    let done = vacuumed_when_due(b, params(10_000, 10_000)).await;
    assert!(done.kept >= 20_000, "{done:?}");
    assert_eq!(done.compacted, None, "the table was left alone: {done:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(rows(&mut c).await, before);
    assert!(table_bytes(&mut c).await > 1_000_000, "the dead rows stay");
    drop(dump);

    // More rows than a compaction may copy: left alone too.
    churn(&url, 30_000).await;
    let done = vacuumed_when_due(b, params(10_000, 5)).await;
    assert_eq!(done.compacted, None, "{done:?}");
    // The function refuses bad input, and changes nothing.
    let bad = sqlx::query("SELECT backlog_job_compact(-1, 20)")
        .execute(&mut c)
        .await;
    assert!(
        matches!(&bad, Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("22023")),
        "{bad:?}"
    );
    assert_eq!(rows(&mut c).await, before);
    drop(report);
}

async fn count(c: &mut PgConnection, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(c)
        .await
        .unwrap()
}

/// Completed jobs kept under retention `keep` move to `backlog_job_done` (schema version 15):
/// the job table keeps only the jobs still to run, so it compacts however many completed jobs
/// a queue keeps, and every read, a retry and the prune find them there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_jobs_live_apart_and_the_table_still_compacts() {
    use backlog_core::{AdminAction, JobListParams, JobPruneParams, JobState, StateFilter};
    let _serial = SERIAL.lock().await;
    let db = harness::Db::postgres().await;
    let (b, url) = (&*db.b, db.url.clone());
    let mut c = PgConnection::connect(&url).await.unwrap();
    let queue = QueueName::new("apart").unwrap();
    const KEPT: i64 = 12_000;
    sqlx::query(
        "INSERT INTO backlog_job (queue, payload, unique_key) \
         SELECT 'apart', jsonb_build_object('i', i), 'u' || i FROM generate_series(1, $1) AS i",
    )
    .bind(KEPT + 3)
    .execute(&mut c)
    .await
    .unwrap();
    let claim = |limit| JobClaimParams {
        queue: queue.clone(),
        kinds: vec![],
        limit,
        owner: "apart".into(),
        lease: Duration::from_secs(600),
        now: backlog_core::now_micros(),
        order: Ordering::Fifo,
        strategy: ClaimStrategy::SkipLocked,
        global_limit: false,
    };
    let mut completed = 0;
    while completed < KEPT {
        let jobs = b.job_claim(&claim(1_000)).await.unwrap();
        let n = jobs.len() as i64;
        let done = (b.job_complete(JobCompleteParams {
            jobs: jobs.iter().map(|j| j.job_ref()).collect(),
            now: backlog_core::now_micros(),
            retention: Retention::Keep,
        }))
        .await
        .unwrap();
        assert_eq!(done.len() as i64, n, "each claimed job completes");
        completed += n;
    }
    let (hot, apart) = (
        count(
            &mut c,
            "SELECT count(*) FROM backlog_job WHERE queue = 'apart'",
        )
        .await,
        count(
            &mut c,
            "SELECT count(*) FROM backlog_job_done WHERE queue = 'apart'",
        )
        .await,
    );
    assert_eq!(
        (hot, apart),
        (3, KEPT),
        "kept jobs are apart; 3 still to run"
    );

    // Reads find them: one by id, a page of the list, the counts.
    let first: i64 = count(&mut c, "SELECT min(id) FROM backlog_job_done").await;
    let job = b.job_get(first).await.unwrap().expect("found");
    assert_eq!(job.state, JobState::Completed);
    assert!(job.finished_at.is_some() && job.lease_token.is_none());
    let list = |state: Option<StateFilter>, after_id| JobListParams {
        queue: Some(queue.clone()),
        state,
        kind: None,
        unique_key: None,
        after_id,
        limit: 100,
        now: backlog_core::now_micros(),
    };
    let page = b.job_list(list(None, 0)).await.unwrap();
    assert_eq!(page.len(), 100);
    assert!(page.windows(2).all(|w| w[0].id < w[1].id), "in id order");
    assert_eq!(page[0].id, first);
    let all = b.job_list(list(None, first + KEPT - 11)).await.unwrap();
    assert_eq!(all.len(), 13, "the merge pages across both tables: {all:?}");
    assert_eq!(
        all.iter()
            .filter(|j| j.state == JobState::Available)
            .count(),
        3
    );
    let due = b
        .job_list(list(Some(StateFilter::Stored(JobState::Available)), 0))
        .await
        .unwrap();
    assert_eq!(due.len(), 3, "no completed job among the available ones");
    let stats = b.queue_stats(Some(&queue), backlog_core::now_micros());
    let stats = stats.await.unwrap();
    assert_eq!((stats[0].1.completed, stats[0].1.available), (KEPT, 3));
    // A kept job's unique key is free again.
    let free = sqlx::query("INSERT INTO backlog_job (queue, unique_key) VALUES ('apart', 'u1')")
        .execute(&mut c)
        .await;
    assert!(free.is_ok(), "{free:?}");

    // A held snapshot: the job table compacts, since it holds only the jobs still to run.
    let report = hold_snapshot(&url, "backlog_queue").await;
    churn(&url, 30_000).await;
    let done = vacuumed_when_due(b, params(10_000, 10_000)).await;
    assert!(done.kept >= 20_000, "{done:?}");
    assert_eq!(done.compacted, Some(4), "the 4 jobs still to run: {done:?}");
    drop(report);

    // A retry moves a kept job back, due, attempts reset. One whose unique key another job
    // took meanwhile (u1, above) is refused, and stays where it was; so is a job not completed.
    let now = backlog_core::now_micros();
    assert!(b.job_admin(first, AdminAction::Retry, now).await.is_err());
    let retried = b
        .job_admin(first + 1, AdminAction::Retry, now)
        .await
        .unwrap();
    assert_eq!((retried.state, retried.attempt), (JobState::Available, 0));
    let back = format!("SELECT count(*) FROM backlog_job WHERE id = {}", first + 1);
    assert_eq!(count(&mut c, &back).await, 1);
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM backlog_job_done").await,
        KEPT - 1
    );
    assert!(
        b.job_admin(first + 1, AdminAction::Retry, now)
            .await
            .is_err()
    );

    // The prune: bounded batches, oldest first, until none is left; archive moves them. A
    // snapshot held meanwhile keeps the rows it deletes from VACUUM, and the table is never
    // compacted (every completion writes it, and would wait for the compaction's lock): the
    // partitions the prune left with no row are emptied whole (version 16).
    let report = hold_snapshot(&url, "backlog_queue").await;
    let prune = |limit, archive| JobPruneParams {
        queue: queue.clone(),
        state: JobState::Completed,
        finished_before: backlog_core::now_micros() + 1,
        limit,
        archive,
    };
    assert_eq!(b.job_prune(prune(5_000, false)).await.unwrap(), 5_000);
    assert_eq!(b.job_prune(prune(5_000, true)).await.unwrap(), 5_000);
    let archived = count(&mut c, "SELECT count(*) FROM backlog_job_archive").await;
    assert_eq!(archived, 5_000);
    let rest = b.job_prune(prune(5_000, false)).await.unwrap();
    assert_eq!(rest, (KEPT - 1 - 10_000) as u64);
    assert_eq!(b.job_prune(prune(5_000, false)).await.unwrap(), 0);
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM backlog_job_done").await,
        0
    );
    let heap = "SELECT COALESCE(SUM(pg_relation_size(relid)), 0)::bigint \
                FROM pg_partition_tree('backlog_job_done')";
    assert!(count(&mut c, heap).await > 0, "the pruned rows' pages");
    let started = Instant::now();
    let done = loop {
        // The partitions' statistics count no live row within about a second.
        let done = b.job_vacuum(params(5_000, 10_000)).await.unwrap();
        if let Some(done) = done.filter(|d| d.emptied > 0) {
            break done;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never emptied");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        done.compacted, None,
        "backlog_job_done is not compacted: {done:?}"
    );
    assert_eq!(
        count(&mut c, heap).await,
        0,
        "every partition emptied, the snapshot notwithstanding: {done:?}"
    );
    drop(report);
    let archived_id: i64 = count(&mut c, "SELECT min(id) FROM backlog_job_archive").await;
    let job = b.job_get(archived_id).await.unwrap().expect("archived");
    assert_eq!(job.state, JobState::Completed);
}

/// The ring of completed jobs' partitions (version 16): `backlog_job_done_empty` empties a
/// partition only once it holds no row, and passes over one that another session's older
/// transaction holds; the leader's `job_vacuum` sets the ring's period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_of_completed_jobs_is_emptied_only_with_no_row_left() {
    let _serial = SERIAL.lock().await;
    let db = harness::Db::postgres().await;
    let (b, url) = (&*db.b, db.url.clone());
    let mut c = PgConnection::connect(&url).await.unwrap();
    // 1,000 jobs finished in slot 1's period, 1,000 in slot 2's (two-hour periods).
    sqlx::raw_sql(
        "INSERT INTO backlog_job_done (id, queue, kind, payload, state, run_at, attempt, \
             errors, finished_at, slot) \
         SELECT n, 'ring', 'k', '{}', 'completed', 0, 1, '[]', f, backlog_job_done_slot(f) \
         FROM generate_series(1, 2000) n, \
              LATERAL (SELECT CASE WHEN n <= 1000 THEN 7200000000 ELSE 14400000000 END AS f) t; \
         DELETE FROM backlog_job_done WHERE id <= 1000; \
         DELETE FROM backlog_job_done WHERE id > 1000 AND id < 2000;",
    )
    .execute(&mut c)
    .await
    .unwrap();
    let size = |part: &str| {
        let sql = format!("SELECT pg_relation_size('{part}')");
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
    };
    assert!(size("backlog_job_done_1").fetch_one(&mut c).await.unwrap() > 0);
    // Another session's transaction that read slot 1's partition a while ago holds it.
    let reader = hold_snapshot(&url, "backlog_job_done_1").await;
    let empty = "SELECT backlog_job_done_empty(50)";
    let emptied: i32 = sqlx::query_scalar(empty).fetch_one(&mut c).await.unwrap();
    assert_eq!(emptied, 0, "held by the reader");
    drop(reader);
    // Once the statistics count no live row in it, slot 1's partition is emptied; slot 2's,
    // with one row left, never is.
    let started = Instant::now();
    loop {
        let emptied: i32 = sqlx::query_scalar(empty).fetch_one(&mut c).await.unwrap();
        if emptied > 0 {
            assert_eq!(emptied, 1);
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never emptied");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        size("backlog_job_done_1").fetch_one(&mut c).await.unwrap(),
        0
    );
    assert!(size("backlog_job_done_2").fetch_one(&mut c).await.unwrap() > 0);
    let left: Vec<i64> = sqlx::query_scalar("SELECT id FROM backlog_job_done")
        .fetch_all(&mut c)
        .await
        .unwrap();
    assert_eq!(left, [2000]);
    // A statistic that says no row is left is read again under the lock: the row stays.
    sqlx::raw_sql(
        "SELECT pg_stat_reset_single_table_counters('backlog_job_done_2'::regclass); \
         SELECT pg_stat_force_next_flush();",
    )
    .execute(&mut c)
    .await
    .unwrap();
    let emptied: i32 = sqlx::query_scalar(empty).fetch_one(&mut c).await.unwrap();
    assert_eq!(emptied, 0);
    let left: i64 = count(&mut c, "SELECT count(*) FROM backlog_job_done").await;
    assert_eq!(left, 1);

    // The leader sets the ring's period: jobs kept a minute, pruned every 30 s: 7.5 s.
    let mut p = params(1_000_000, 0);
    p.done_period = backlog_core::done_period(Duration::from_secs(60), Duration::from_secs(30));
    b.job_vacuum(p).await.unwrap();
    let period: i64 = count(&mut c, "SELECT period_us FROM backlog_job_done_ring").await;
    assert_eq!(period, 7_500_000);
    let bad = sqlx::query_scalar::<_, i32>("SELECT backlog_job_done_empty(0)")
        .fetch_one(&mut c)
        .await;
    assert!(
        format!("{bad:?}").contains("lock_wait_ms must be >= 1"),
        "{bad:?}"
    );
}
