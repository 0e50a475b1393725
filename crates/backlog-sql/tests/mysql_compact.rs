//! MariaDB: while another session's old snapshot keeps purge from removing the records that
//! completed jobs leave, the leader's `job_vacuum` rebuilds the job table online
//! (`job_compact.sql`), keeping every job as it was, and leaves it alone when a session may hold
//! the table.
#![cfg(feature = "servers")]

#[allow(dead_code, unused_macros, unused_imports)]
mod harness;

use std::time::{Duration, Instant};

use backlog_core::{
    ClaimStrategy, JobClaimParams, JobCompleteParams, JobInsertParams, JobVacuumParams, NewJob,
    Ordering, Payload, QueueName, Retention,
};
use sqlx::{Connection, MySqlConnection};

fn params() -> JobVacuumParams {
    JobVacuumParams {
        min_dead: 10_000,
        compact_max_live: 10_000,
        compact_lock_wait: Duration::from_millis(20),
        done_period: Duration::from_secs(7200),
    }
}

/// The job table's tablespace, in bytes.
async fn file_bytes(c: &mut MySqlConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT CAST(FILE_SIZE AS SIGNED) FROM information_schema.INNODB_SYS_TABLESPACES \
         WHERE NAME = CONCAT(DATABASE(), '/backlog_job')",
    )
    .fetch_one(c)
    .await
    .unwrap()
}

/// A checksum of every row of the job table.
async fn checksum(c: &mut MySqlConnection) -> i64 {
    let row: (String, i64) = sqlx::query_as("CHECKSUM TABLE backlog_job")
        .fetch_one(c)
        .await
        .unwrap();
    row.1
}

/// Inserts and deletes `n` jobs of another queue: records purge may not remove while a
/// snapshot is held.
async fn churn(c: &mut MySqlConnection, n: i64) {
    let sql = format!(
        "INSERT INTO backlog_job (queue, payload) \
         SELECT 'churn', JSON_OBJECT('pad', REPEAT('x', 200)) FROM seq_1_to_{n}"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut *c)
        .await
        .unwrap();
    sqlx::query("DELETE FROM backlog_job WHERE queue = 'churn'")
        .execute(&mut *c)
        .await
        .unwrap();
}

/// Another session's open transaction: `sql` runs in it, and it stays open until dropped.
async fn hold(url: &str, sql: &str) -> MySqlConnection {
    let mut c = MySqlConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut c)
        .await
        .unwrap();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_snapshot_cannot_keep_the_records_of_completed_jobs() {
    let db = harness::Db::mysql().await;
    let (b, url) = (&*db.b, db.url.clone());
    let mut c = MySqlConnection::connect(&url).await.unwrap();
    let queue = QueueName::new("kept").unwrap();
    let payload = Payload::parse("{\"a\": 1}", 1024).unwrap();
    let mut jobs = vec![NewJob::new(queue.clone(), payload); 4];
    jobs[1].unique_key = Some(backlog_core::UniqueKey::new("u1").unwrap());
    let now = backlog_core::now_micros();
    b.job_insert(JobInsertParams { jobs, now }).await.unwrap();
    let running = (b.job_claim(&JobClaimParams {
        queue: queue.clone(),
        kinds: vec![],
        limit: 1,
        owner: "compact".into(),
        lease: Duration::from_secs(600),
        now,
        order: Ordering::Fifo,
        strategy: ClaimStrategy::SkipLocked,
        global_limit: false,
    }))
    .await
    .unwrap();
    assert_eq!(running.len(), 1);
    sqlx::raw_sql(
        "UPDATE backlog_job SET state = 'held' WHERE unique_key = 'u1'; \
         UPDATE backlog_job SET state = 'dead', finished_at = 9, errors = '[\"boom\"]' \
         WHERE state = 'available' ORDER BY id LIMIT 1",
    )
    .execute(&mut c)
    .await
    .unwrap();
    let max_id: i64 = sqlx::query_scalar("SELECT MAX(id) FROM backlog_job")
        .fetch_one(&mut c)
        .await
        .unwrap();

    // A report over another table holds purge back, not the job table. Nothing is rebuilt
    // before its transaction is 10 s old, nor while the tablespace is small.
    let report = hold(
        &url,
        "START TRANSACTION WITH CONSISTENT SNAPSHOT; SELECT COUNT(*) FROM backlog_queue",
    )
    .await;
    let held_since = Instant::now();
    assert_eq!(b.job_vacuum(params()).await.unwrap(), None);
    churn(&mut c, 60_000).await;
    let before = (file_bytes(&mut c).await, checksum(&mut c).await);
    assert!(before.0 >= 16 << 20, "the churn left {} bytes", before.0);
    tokio::time::sleep(Duration::from_secs(11).saturating_sub(held_since.elapsed())).await;
    let done = b.job_vacuum(params()).await.unwrap().expect("a rebuild");
    assert!(done.compacted.is_some(), "{done:?}");
    let after = (file_bytes(&mut c).await, checksum(&mut c).await);
    assert!(after.0 < before.0 / 8, "{} -> {} bytes", before.0, after.0);
    assert_eq!(after.1, before.1, "every job is as it was");

    // The jobs work on: the running one completes under its lease token, the held job's unique
    // key is still taken, and a new job takes a new id.
    let refs = running.iter().map(|j| j.job_ref()).collect();
    let now = backlog_core::now_micros();
    let completed = (b.job_complete(JobCompleteParams {
        jobs: refs,
        now,
        retention: Retention::Delete,
    }))
    .await
    .unwrap();
    assert_eq!(completed.len(), 1, "the lease token still fences its job");
    let taken = sqlx::query("INSERT INTO backlog_job (queue, unique_key) VALUES ('kept', 'u1')")
        .execute(&mut c)
        .await;
    assert!(
        taken.is_err(),
        "the held job's unique key u1 is still taken"
    );
    let id = sqlx::query("INSERT INTO backlog_job (queue) VALUES ('kept')")
        .execute(&mut c)
        .await
        .unwrap()
        .last_insert_id();
    assert!(
        id as i64 > max_id,
        "id {id} after {max_id}: AUTO_INCREMENT kept"
    );

    // A transactional enqueue left open may hold the table: left alone.
    churn(&mut c, 60_000).await;
    let open = hold(
        &url,
        "START TRANSACTION; INSERT INTO backlog_job (queue) VALUES ('open')",
    )
    .await;
    // Older than a second by INNODB_TRX's whole-second `trx_started`, whatever its fraction.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let before = (file_bytes(&mut c).await, checksum(&mut c).await);
    assert_eq!(b.job_vacuum(params()).await.unwrap(), None);
    assert_eq!(
        file_bytes(&mut c).await,
        before.0,
        "the table was left alone"
    );
    open.close().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await; // the server rolls it back

    // A snapshot that read the job table holds its metadata lock: the rebuild waits for it a
    // second, gives up and waits a minute before it tries again.
    let dump = hold(
        &url,
        "START TRANSACTION WITH CONSISTENT SNAPSHOT; SELECT COUNT(*) FROM backlog_job",
    )
    .await;
    let started = Instant::now();
    let done = b.job_vacuum(params()).await.unwrap().expect("a try");
    assert_eq!(done.compacted, None, "{done:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(b.job_vacuum(params()).await.unwrap(), None, "backing off");
    let now = (file_bytes(&mut c).await, checksum(&mut c).await);
    assert_eq!(now.1, before.1, "nothing changed");
    dump.close().await.unwrap();
    report.close().await.unwrap();
}
