//! PostgreSQL: the leader's `job_vacuum` reclaims the dead rows that completed jobs leave in the
//! job table once enough have piled up, so the table's space is reused rather than grown, even
//! with autovacuum off (as on the CI database).
#![cfg(feature = "servers")]

// The conformance suite's harness: this test uses its PostgreSQL schema only.
#[allow(dead_code, unused_macros, unused_imports)]
mod harness;

use std::time::{Duration, Instant};

use backlog_core::{Backend, JobVacuumParams};
use sqlx::{Connection, PgConnection};

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
    let started = Instant::now();
    loop {
        if let Some(dead) = b.job_vacuum(JobVacuumParams { min_dead }).await.unwrap() {
            return dead;
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
    // A schema of its own (the harness's), so other tests' rows do not count.
    let db = harness::Db::postgres().await;
    let (b, url) = (&*db.b, db.url.clone());
    let mut c = PgConnection::connect(&url).await.unwrap();

    // A fresh table: nothing to do.
    let none = b.job_vacuum(JobVacuumParams { min_dead: 0 }).await.unwrap();
    assert_eq!(none, None, "an empty table is left alone");

    churn(&url, 20_000).await;
    // Below the threshold (min_dead plus a tenth of the live rows), the rows stay dead.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let left = b
        .job_vacuum(JobVacuumParams { min_dead: 50_000 })
        .await
        .unwrap();
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
        b.job_vacuum(JobVacuumParams { min_dead: 10_000 })
            .await
            .unwrap(),
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
