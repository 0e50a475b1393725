//! PostgreSQL: the upgrades to schema version 15 (completed jobs kept apart in `backlog_job_done`)
//! and 16 (that table a ring of partitions) are online. A database at version 14 holding jobs in
//! every state, completed ones in the job table as version 14 kept them, is migrated while they
//! are there; afterwards every job reads as before, the running one completes under its lease
//! token (into `backlog_job_done`), the old completed one is counted, listed, retried and pruned
//! where it is, and the view `backlog_job_all` shows every job once. A database at version 15
//! with completed jobs in its `backlog_job_done` keeps them through version 16.
#![cfg(feature = "servers")]

#[allow(dead_code, unused_macros, unused_imports)]
mod harness;

use std::time::Duration;

use backlog_core::{
    AdminAction, ClaimStrategy, JobClaimParams, JobCompleteParams, JobListParams, JobPruneParams,
    JobState, Ordering, QueueName, Retention,
};
use sqlx::{Connection, PgConnection};

async fn count(c: &mut PgConnection, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(c)
        .await
        .unwrap()
}

/// Back to version 14: what 0015_job_done.sql, 0016_job_done_ring.sql and the later versions
/// made, gone.
const BACK_TO_14: &str = "DROP TRIGGER backlog_job_deps_update ON backlog_job; \
    DROP TRIGGER backlog_job_deps_delete ON backlog_job; \
    DROP FUNCTION backlog_job_deps_ended(); DROP FUNCTION backlog_job_deps_release(bigint[], text[]); \
    DROP TABLE backlog_job_dep; \
    ALTER TABLE backlog_job DROP COLUMN deps_left, DROP COLUMN has_dependents; \
    DROP TRIGGER backlog_job_count_insert ON backlog_job; \
    DROP TRIGGER backlog_job_count_update ON backlog_job; \
    DROP TRIGGER backlog_job_count_delete ON backlog_job; \
    DROP TRIGGER backlog_job_archive_count_insert ON backlog_job_archive; \
    DROP TRIGGER backlog_job_archive_count_update ON backlog_job_archive; \
    DROP TRIGGER backlog_job_archive_count_delete ON backlog_job_archive; \
    DROP VIEW backlog_job_all; DROP TABLE backlog_job_done; DROP TABLE backlog_count; \
    DROP FUNCTION backlog_job_counted(); DROP FUNCTION backlog_job_kept_counted(); \
    DROP FUNCTION backlog_count_fold(integer); DROP FUNCTION backlog_count_slot(); \
    DROP FUNCTION backlog_job_done_slot(bigint); DROP FUNCTION backlog_job_done_empty(integer); \
    DROP TABLE backlog_job_done_ring; DROP TABLE backlog_worker; \
    ALTER TABLE backlog_cron DROP COLUMN schedule, DROP COLUMN queue, DROP COLUMN kind, \
        DROP COLUMN next_tick, DROP COLUMN declared_at; \
    DELETE FROM backlog_migration WHERE version >= 15";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_in_every_state_survive_the_upgrades_to_versions_15_and_16() {
    let db = harness::Db::postgres().await;
    let (b, url) = (&*db.b, db.url.clone());
    let mut c = PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(BACK_TO_14).execute(&mut c).await.unwrap();
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
    let claim = JobClaimParams {
        queue: queue.clone(),
        kinds: vec![],
        limit: 1,
        owner: "upgrade".into(),
        lease: Duration::from_secs(600),
        now: backlog_core::now_micros(),
        order: Ordering::Fifo,
        strategy: ClaimStrategy::SkipLocked,
        global_limit: false,
    };
    let running = b.job_claim(&claim).await.unwrap();
    assert_eq!(running.len(), 1, "the head is running, under a lease");
    let list = JobListParams {
        queue: Some(queue.clone()),
        state: None,
        kind: None,
        unique_key: None,
        after_id: 0,
        limit: 100,
        now: backlog_core::now_micros(),
    };
    let rows = |table: &'static str| {
        let sql = format!("SELECT row_to_json(j)::text FROM {table} j ORDER BY id");
        sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
    };
    let at_14 = rows("backlog_job").fetch_all(&mut c).await.unwrap();
    assert_eq!(at_14.len(), 7);
    // This version's reads need its schema, and say so.
    let refused = b.job_list(list.clone()).await;
    assert!(
        matches!(refused, Err(backlog_core::Error::SchemaOutdated { .. })),
        "{refused:?}"
    );

    let report = b.migrate().await.unwrap();
    assert_eq!(
        (report.applied, report.current),
        (vec![15, 16, 17, 18, 19, 20], 20)
    );
    let at_15 = rows("backlog_job_all").fetch_all(&mut c).await.unwrap();
    assert_eq!(at_15, at_14, "every job as it was");
    let before = b.job_list(list.clone()).await.unwrap();
    assert_eq!(before.len(), 7);
    let all = "SELECT count(*) FROM backlog_job_all WHERE queue = 'up'";
    assert_eq!(count(&mut c, all).await, 7);

    // The running job completes under its token, into backlog_job_done.
    let done = (b.job_complete(JobCompleteParams {
        jobs: running.iter().map(|j| j.job_ref()).collect(),
        now: backlog_core::now_micros(),
        retention: Retention::Keep,
    }))
    .await
    .unwrap();
    assert_eq!(done.len(), 1);
    let apart = "SELECT count(*) FROM backlog_job_done WHERE queue = 'up'";
    assert_eq!(count(&mut c, apart).await, 1);
    assert_eq!(count(&mut c, all).await, 7, "moved, not copied");
    // The counts version 19 keeps took in the jobs already there, once.
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

    // The completed job of version 14, still in the job table: read, retried, pruned there.
    let old = before
        .iter()
        .find(|j| j.state == JobState::Completed)
        .unwrap();
    let now = backlog_core::now_micros();
    let retried = b.job_admin(old.id, AdminAction::Retry, now).await.unwrap();
    assert_eq!(retried.state, JobState::Available);
    let prune = JobPruneParams {
        queue: queue.clone(),
        state: JobState::Completed,
        finished_before: backlog_core::now_micros() + 1,
        limit: 100,
        archive: false,
    };
    assert_eq!(
        b.job_prune(prune).await.unwrap(),
        1,
        "the job completed above"
    );
    assert_eq!(count(&mut c, all).await, 6);
    // Migrating again changes nothing.
    assert_eq!(b.migrate().await.unwrap().applied, Vec::<i64>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completed_jobs_kept_at_version_15_move_into_the_ring() {
    let db = harness::Db::postgres().await;
    let (b, url) = (&*db.b, db.url.clone());
    let mut c = PgConnection::connect(&url).await.unwrap();
    // A version 15 database: backlog_job_done a plain table, holding two completed jobs.
    sqlx::raw_sql(BACK_TO_14).execute(&mut c).await.unwrap();
    let v15 = include_str!("../migrations/postgres/0015_job_done.sql");
    sqlx::raw_sql(v15).execute(&mut c).await.unwrap();
    sqlx::raw_sql(
        "INSERT INTO backlog_migration VALUES (15, 'job_done', 0); \
         INSERT INTO backlog_job_done (id, queue, kind, payload, state, run_at, attempt, \
             errors, result, finished_at) VALUES \
         (900001, 'ring', 'k', '{}', 'completed', 1, 1, '[]', '{\"n\": 1}', 7200000000), \
         (900002, 'ring', 'k', '{}', 'completed', 2, 1, '[]', NULL, 3 * 7200000000 + 5)",
    )
    .execute(&mut c)
    .await
    .unwrap();
    let jobs = "SELECT row_to_json(j)::text FROM backlog_job_all j ORDER BY id";
    let at_15: Vec<String> = sqlx::query_scalar(jobs).fetch_all(&mut c).await.unwrap();
    assert_eq!(at_15.len(), 2);

    let report = b.migrate().await.unwrap();
    assert_eq!(
        (report.applied, report.current),
        (vec![16, 17, 18, 19, 20], 20)
    );
    let at_16: Vec<String> = sqlx::query_scalar(jobs).fetch_all(&mut c).await.unwrap();
    assert_eq!(at_16, at_15, "every job as it was");
    // Each in the partition of its finish time's slot (two-hour periods).
    let slots: Vec<(String, i64)> = sqlx::query_as(
        "SELECT tableoid::regclass::text, finished_at FROM backlog_job_done ORDER BY id",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    let names: Vec<&str> = slots.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names, ["backlog_job_done_1", "backlog_job_done_3"]);
    let id: i64 = sqlx::query_scalar("SELECT min(id) FROM backlog_job_done")
        .fetch_one(&mut c)
        .await
        .unwrap();
    let job = b.job_get(id).await.unwrap().expect("found in the ring");
    assert_eq!(
        (job.state, job.result.as_deref()),
        (JobState::Completed, Some(r#"{"n": 1}"#))
    );
    let prune = JobPruneParams {
        queue: QueueName::new("ring").unwrap(),
        state: JobState::Completed,
        finished_before: 3 * 7_200_000_000,
        limit: 100,
        archive: false,
    };
    assert_eq!(b.job_prune(prune).await.unwrap(), 1, "the earlier one");
    let left = "SELECT count(*) FROM backlog_job_all WHERE queue = 'ring'";
    assert_eq!(count(&mut c, left).await, 1);
}
