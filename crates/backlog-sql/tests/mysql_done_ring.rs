//! MySQL/MariaDB, schema version 17: a job completed under retention `keep` moves out of the job
//! table into the table of the completed jobs' ring that completions write now (the view
//! `backlog_job_done_current`); reads, counts and retries find it there; the leader's
//! `job_done_turn` turns completions to the next table once a period has passed and empties,
//! whole and without waiting, each other table whose every job is past the window, passing over
//! a table another session holds and going on while a snapshot of other tables is held.
#![cfg(feature = "servers")]

#[allow(dead_code, unused_macros, unused_imports)]
mod harness;

use std::time::{Duration, Instant};

use backlog_core::{
    AdminAction, Backend, ClaimStrategy, JobClaimParams, JobCompleteParams, JobDoneTurnParams,
    JobInsertParams, JobListParams, JobState, NewJob, Ordering, Payload, QueueName, Retention,
    StateFilter,
};
use sqlx::{Connection, MySqlConnection};

async fn count(c: &mut MySqlConnection, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(c)
        .await
        .unwrap()
}

/// How many jobs each table of the ring holds.
async fn ring(c: &mut MySqlConnection) -> Vec<i64> {
    let mut out = vec![];
    for k in 0..16 {
        out.push(count(c, &format!("SELECT COUNT(*) FROM backlog_job_done_{k}")).await);
    }
    out
}

/// Enqueues `n` jobs on `queue`, claims them and completes them under `retention`: their ids.
async fn complete(b: &dyn Backend, queue: &QueueName, n: usize, retention: Retention) -> Vec<i64> {
    let payload = Payload::parse("{\"a\": 1}", 1024).unwrap();
    let now = backlog_core::now_micros();
    let jobs = vec![NewJob::new(queue.clone(), payload); n];
    b.job_insert(JobInsertParams { jobs, now }).await.unwrap();
    let claimed = (b.job_claim(&JobClaimParams {
        queue: queue.clone(),
        kinds: vec![],
        limit: n as u32,
        owner: "ring".into(),
        lease: Duration::from_secs(600),
        now,
        order: Ordering::Fifo,
        strategy: ClaimStrategy::SkipLocked,
        global_limit: false,
    }))
    .await
    .unwrap();
    assert_eq!(claimed.len(), n);
    let done = (b.job_complete(JobCompleteParams {
        jobs: claimed.iter().map(|j| j.job_ref()).collect(),
        now: backlog_core::now_micros(),
        retention,
    }))
    .await
    .unwrap();
    assert_eq!(done.len(), n, "every job completed under its lease");
    done.iter().map(|j| j.id).collect()
}

/// The turn the leader runs: `period` since the last turn, jobs finished before
/// `finished_before` past their window.
fn turn(period: Duration, finished_before: i64) -> JobDoneTurnParams {
    JobDoneTurnParams {
        now: backlog_core::now_micros(),
        period,
        finished_before,
    }
}

/// Turns until a table is emptied (5 s at most): right after a table's last writes, InnoDB's
/// statistics thread holds its metadata lock for a moment, and `NOWAIT` passes it over, as it
/// would pass over a session's; the leader's next pass empties it.
async fn turn_until_emptied(b: &dyn Backend, period: Duration, finished_before: i64) -> u64 {
    for _ in 0..100 {
        let n = b
            .job_done_turn(turn(period, finished_before))
            .await
            .unwrap();
        if n > 0 {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    0
}

/// Far in the past: no job is past its window.
const NONE_PAST: i64 = 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_jobs_move_into_the_ring_and_a_retry_brings_one_back() {
    let db = harness::Db::mysql().await;
    let b = &*db.b;
    let mut c = MySqlConnection::connect(&db.url).await.unwrap();
    let queue = QueueName::new("kept").unwrap();
    let ids = complete(b, &queue, 3, Retention::Keep).await;
    let deleted = complete(b, &queue, 2, Retention::Delete).await;
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM backlog_job").await, 0);
    assert_eq!(
        ring(&mut c).await[0],
        3,
        "kept in the table completions write first"
    );
    assert_eq!(
        count(&mut c, "SELECT COUNT(*) FROM backlog_job_all").await,
        3
    );

    // Read, listed and counted where they are.
    let job = b.job_get(ids[1]).await.unwrap().expect("found in the ring");
    assert_eq!((job.state, job.attempt), (JobState::Completed, 1));
    assert!(job.finished_at.is_some());
    assert!(b.job_get(deleted[0]).await.unwrap().is_none());
    let list = |state| JobListParams {
        queue: Some(queue.clone()),
        state,
        kind: None,
        unique_key: None,
        after_id: 0,
        limit: 2,
        now: backlog_core::now_micros(),
    };
    let listed: Vec<i64> = (b
        .job_list(list(Some(StateFilter::Stored(JobState::Completed))))
        .await
        .unwrap())
    .iter()
    .map(|j| j.id)
    .collect();
    assert_eq!(listed, ids[..2], "the first two, in id order");
    assert!(
        b.job_list(list(Some(StateFilter::Stored(JobState::Dead))))
            .await
            .unwrap()
            .is_empty()
    );
    let stats = b.queue_stats(Some(&queue), db.now).await.unwrap();
    assert_eq!(stats[0].1.completed, 3, "{stats:?}");

    // A retry moves the job back into the job table, available, in one transaction.
    let now = backlog_core::now_micros();
    let retried = b.job_admin(ids[1], AdminAction::Retry, now).await.unwrap();
    assert_eq!(retried.state, JobState::Available);
    assert_eq!(ring(&mut c).await[0], 2);
    let back = "SELECT COUNT(*) FROM backlog_job WHERE state = 'available'";
    assert_eq!(count(&mut c, back).await, 1);
    // A second retry finds it available: refused, nothing moved.
    assert!(b.job_admin(ids[1], AdminAction::Retry, now).await.is_err());
    assert_eq!(ring(&mut c).await[0], 2);
    db.cleanup().run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ring_turns_and_empties_only_tables_past_the_window() {
    let db = harness::Db::mysql().await;
    let b = &*db.b;
    let mut c = MySqlConnection::connect(&db.url).await.unwrap();
    let queue = QueueName::new("ring").unwrap();
    let hour = Duration::from_secs(3600);

    // Not a period since the migration: no turn, and no table is past the window.
    complete(b, &queue, 4, Retention::Keep).await;
    assert_eq!(b.job_done_turn(turn(hour, NONE_PAST)).await.unwrap(), 0);
    complete(b, &queue, 1, Retention::Keep).await;
    assert_eq!(ring(&mut c).await[..2], [5, 0]);
    let period = "SELECT period_us FROM backlog_job_done_ring";
    assert_eq!(
        count(&mut c, period).await,
        3_600_000_000,
        "set by the leader"
    );

    // A period passed: completions turn to the next table, which is empty.
    let first_done = backlog_core::now_micros();
    assert_eq!(
        b.job_done_turn(turn(Duration::ZERO, NONE_PAST))
            .await
            .unwrap(),
        0
    );
    complete(b, &queue, 2, Retention::Keep).await;
    assert_eq!(ring(&mut c).await[..3], [5, 2, 0]);

    // Table 0's jobs are all past the window, table 1's are not: only table 0 is emptied, and
    // a turn to table 2 follows.
    assert_eq!(turn_until_emptied(b, hour, first_done).await, 1);
    b.job_done_turn(turn(Duration::ZERO, first_done))
        .await
        .unwrap();
    complete(b, &queue, 1, Retention::Keep).await;
    assert_eq!(ring(&mut c).await[..3], [0, 2, 1]);
    let stats = b.queue_stats(Some(&queue), db.now).await.unwrap();
    assert_eq!(stats[0].1.completed, 3, "{stats:?}");

    // Sixteen turns come back to table 0 only while each next table is empty: table 1 (not
    // past the window) stops the ring before it, and completions stay where they write.
    for _ in 0..20 {
        b.job_done_turn(turn(Duration::ZERO, first_done))
            .await
            .unwrap();
    }
    complete(b, &queue, 1, Retention::Keep).await;
    let r = ring(&mut c).await;
    assert_eq!((r[0], r[1], r[2]), (1, 2, 1), "{r:?}");
    assert_eq!(r.iter().sum::<i64>(), 4, "{r:?}");
    db.cleanup().run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_another_session_holds_is_passed_over_and_a_snapshot_stops_nothing() {
    let db = harness::Db::mysql().await;
    let b = &*db.b;
    let mut c = MySqlConnection::connect(&db.url).await.unwrap();
    let queue = QueueName::new("held").unwrap();
    complete(b, &queue, 3, Retention::Keep).await;
    b.job_done_turn(turn(Duration::ZERO, NONE_PAST))
        .await
        .unwrap();
    let past = backlog_core::now_micros();

    // A report that read table 0 in its transaction holds it: passed over at once.
    let mut report = MySqlConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql("START TRANSACTION; SELECT COUNT(*) FROM backlog_job_done_0")
        .execute(&mut report)
        .await
        .unwrap();
    let t = Instant::now();
    assert_eq!(
        b.job_done_turn(turn(Duration::ZERO, past)).await.unwrap(),
        0
    );
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(ring(&mut c).await[0], 3);
    sqlx::raw_sql("COMMIT").execute(&mut report).await.unwrap();

    // A consistent snapshot of other tables (a report, mysqldump of another table) stops
    // nothing: the table is emptied whole, what the snapshot keeps of it with it.
    sqlx::raw_sql("START TRANSACTION WITH CONSISTENT SNAPSHOT; SELECT COUNT(*) FROM backlog_queue")
        .execute(&mut report)
        .await
        .unwrap();
    assert_eq!(turn_until_emptied(b, Duration::ZERO, past).await, 1);
    assert_eq!(ring(&mut c).await[0], 0);
    report.close().await.unwrap();
    db.cleanup().run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_jobs_of_a_queue_that_now_archives_are_archived_before_their_table_is_emptied() {
    let db = harness::Db::mysql().await;
    let b = &*db.b;
    let mut c = MySqlConnection::connect(&db.url).await.unwrap();
    let (kept, archived) = (QueueName::new("k").unwrap(), QueueName::new("a").unwrap());
    complete(b, &kept, 2, Retention::Keep).await;
    let ids = complete(b, &archived, 3, Retention::Keep).await;
    let mut s = backlog_core::QueueSettings::defaults(archived.clone());
    s.retention = Retention::Archive;
    b.queue_upsert(&s, db.now).await.unwrap();
    b.job_done_turn(turn(Duration::ZERO, NONE_PAST))
        .await
        .unwrap();
    let past = backlog_core::now_micros();
    assert_eq!(turn_until_emptied(b, Duration::ZERO, past).await, 1);
    assert_eq!(ring(&mut c).await.iter().sum::<i64>(), 0);
    let in_archive = "SELECT COUNT(*) FROM backlog_job_archive WHERE queue = 'a'";
    assert_eq!(count(&mut c, in_archive).await, 3);
    let job = b
        .job_get(ids[0])
        .await
        .unwrap()
        .expect("archived, still found");
    assert_eq!(job.state, JobState::Completed);
    db.cleanup().run().await;
}

/// Back to version 16: what 0017_mysql_done_ring.sql and the later versions made, gone.
fn back_to_16() -> String {
    let tables: Vec<String> = (0..16).map(|k| format!("backlog_job_done_{k}")).collect();
    format!(
        "DROP VIEW backlog_job_all, backlog_job_done, backlog_job_done_current; \
         DROP TABLE {}, backlog_job_done_ring, backlog_worker, backlog_job_dep; \
         ALTER TABLE backlog_job DROP COLUMN deps_left, DROP COLUMN has_dependents; \
         ALTER TABLE backlog_cron DROP COLUMN schedule, DROP COLUMN queue, DROP COLUMN kind, \
             DROP COLUMN next_tick, DROP COLUMN declared_at; \
         CREATE VIEW backlog_job_all AS SELECT * FROM backlog_job; \
         DELETE FROM backlog_migration WHERE version >= 17",
        tables.join(", ")
    )
}

/// The upgrade is online: a version 16 database holding jobs in every state, a completed one in
/// the job table where version 16 kept it, migrates while they are there; every job reads as
/// before, the running one completes under its lease token into the ring, and the old
/// completed one is counted, listed and pruned where it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_in_every_state_survive_the_upgrade_to_version_17() {
    let db = harness::Db::mysql().await;
    let b = &*db.b;
    let mut c = MySqlConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(back_to_16()))
        .execute(&mut c)
        .await
        .unwrap();
    sqlx::raw_sql(
        "INSERT INTO backlog_job (queue, kind, payload, state, run_at, unique_key, attempt, \
             errors, result, finished_at) VALUES \
         ('up', 'k', '{\"n\": 1}', 'available', 1, 'u1', 0, '[]', NULL, NULL), \
         ('up', 'k', '{\"n\": 2}', 'available', 2, NULL, 0, '[]', NULL, NULL), \
         ('up', 'k', '{}', 'held', 3, NULL, 0, '[]', NULL, NULL), \
         ('up', 'k', '{}', 'dead', 4, NULL, 3, '[\"boom\"]', NULL, 9), \
         ('up', 'k', '{}', 'cancelled', 5, NULL, 1, '[]', NULL, 9), \
         ('up', 'k', '{}', 'completed', 6, 'u2', 1, '[]', '{\"ok\": 1}', 9), \
         ('up', 'k', '{}', 'available', 9999999999999999, NULL, 0, '[]', NULL, NULL)",
    )
    .execute(&mut c)
    .await
    .unwrap();
    let queue = QueueName::new("up").unwrap();
    let running = (b.job_claim(&JobClaimParams {
        queue: queue.clone(),
        kinds: vec![],
        limit: 1,
        owner: "upgrade".into(),
        lease: Duration::from_secs(600),
        now: backlog_core::now_micros(),
        order: Ordering::Fifo,
        strategy: ClaimStrategy::SkipLocked,
        global_limit: false,
    }))
    .await
    .unwrap();
    assert_eq!(running.len(), 1, "the head is running, under a lease");
    let rows = "SELECT JSON_ARRAYAGG(JSON_OBJECT('id', id, 'state', state, 'payload', payload, \
                'attempt', attempt, 'result', result, 'finished_at', finished_at)) \
                FROM (SELECT * FROM backlog_job_all ORDER BY id) j";
    let at_16: String = sqlx::query_scalar(rows).fetch_one(&mut c).await.unwrap();

    let report = b.migrate().await.unwrap();
    assert_eq!((report.applied, report.current), (vec![17, 18, 19, 20], 20));
    let at_17: String = sqlx::query_scalar(rows).fetch_one(&mut c).await.unwrap();
    assert_eq!(at_17, at_16, "every job as it was");

    // The running job completes under its token, into the ring.
    let done = (b.job_complete(JobCompleteParams {
        jobs: running.iter().map(|j| j.job_ref()).collect(),
        now: backlog_core::now_micros(),
        retention: Retention::Keep,
    }))
    .await
    .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(ring(&mut c).await[0], 1);
    let all = "SELECT COUNT(*) FROM backlog_job_all WHERE queue = 'up'";
    assert_eq!(count(&mut c, all).await, 7, "moved, not copied");
    // The counts are a scan's (MySQL keeps none: migrations/mysql/0019_counts.sql).
    let now = backlog_core::now_micros();
    let scan = b.queue_stats_scan(Some(&queue), now).await.unwrap();
    let stats = b.queue_stats(Some(&queue), now);
    let s = stats.await.unwrap()[0].1.clone();
    assert_eq!(s, scan[0].1, "the kept counts are a scan's");
    assert_eq!(
        (
            s.available,
            s.scheduled,
            s.held,
            s.dead,
            s.cancelled,
            s.completed
        ),
        (1, 1, 1, 1, 1, 2)
    );

    // The completed job of version 16, still in the job table: listed and pruned there.
    let list = JobListParams {
        queue: Some(queue.clone()),
        state: Some(StateFilter::Stored(JobState::Completed)),
        kind: None,
        unique_key: None,
        after_id: 0,
        limit: 10,
        now: backlog_core::now_micros(),
    };
    assert_eq!(b.job_list(list).await.unwrap().len(), 2);
    let prune = backlog_core::JobPruneParams {
        queue: queue.clone(),
        state: JobState::Completed,
        finished_before: 10,
        limit: 100,
        archive: false,
    };
    assert_eq!(b.job_prune(prune).await.unwrap(), 1, "the version 16 one");
    assert_eq!(count(&mut c, all).await, 6);
    assert_eq!(b.migrate().await.unwrap().applied, Vec::<i64>::new());
    db.cleanup().run().await;
}
