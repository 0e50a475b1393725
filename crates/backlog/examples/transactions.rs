//! Transactions, both ways, with the application's own sqlx pool:
//! - enqueue inside the application's transaction: the job exists only if the order does;
//! - complete a job in the same commit as the handler's writes: a receipt row is written exactly
//!   once per job, fenced by the job's lease token.
//!
//!     cargo run -p backlog --example transactions
//!
//! Shown on SQLite; with `PgPool` / `PgBackend` or `MySqlPool` / `MySqlBackend` it reads the same.

use backlog::sqlx::{self, SqlitePool};
use backlog::{Client, JobContext, Outcome, SqlBackend, SqliteBackend, Worker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("shop.db").display());
    let pool = SqlitePool::connect(&url).await?;
    let client = Client::from_sql(SqlBackend::Sqlite(SqliteBackend::from_pool(pool.clone())));
    client.migrate().await?;
    sqlx::raw_sql(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL);
                   CREATE TABLE receipts (order_id INTEGER NOT NULL, job_id INTEGER NOT NULL);",
    )
    .execute(&pool)
    .await?;

    // 1. Enqueue in the application's transaction.
    for (order, commit) in [(1_i64, true), (2, false), (3, true)] {
        let mut tx = pool.begin().await?;
        sqlx::query("INSERT INTO orders (id, total) VALUES (?, ?)")
            .bind(order)
            .bind(order * 100)
            .execute(&mut *tx)
            .await?;
        let job = client.new_job("receipts", &serde_json::json!({ "order": order }))?;
        client.enqueue_in(&mut *tx, vec![job]).await?;
        if commit {
            tx.commit().await?;
        } else {
            tx.rollback().await?; // no order 2, and no job for it either
        }
    }

    // 2. Complete each job in the handler's own transaction.
    let worker = Worker::builder(client)
        .queue("receipts", 2)
        .fallback_handler(|ctx: JobContext| async move {
            let order: serde_json::Value = serde_json::from_str(&ctx.job().payload)?;
            let mut tx = ctx.begin().await?;
            let conn = tx.sqlite().expect("this example runs on SQLite");
            sqlx::query("INSERT INTO receipts (order_id, job_id) VALUES (?, ?)")
                .bind(order["order"].as_i64())
                .bind(ctx.id())
                .execute(conn)
                .await?;
            Ok(Outcome::CompleteInTx(tx)) // the receipt and the completion commit together
        })
        .build()?;
    let report = worker.drain().await?;
    let receipts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM receipts")
        .fetch_one(&pool)
        .await?;
    println!(
        "orders committed: 2, jobs completed: {}, receipts: {receipts}",
        report.completed
    );
    assert_eq!((report.completed, receipts), (2, 2));
    Ok(())
}
