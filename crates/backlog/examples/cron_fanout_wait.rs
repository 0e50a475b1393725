//! Messaging and schedules: a topic fans out to two queues (each gets its own copy), a producer
//! waits for the outcome of a job it enqueued, and a periodic job fires once per tick however
//! many workers run.
//!
//!     cargo run -p backlog --example cron_fanout_wait
//!
//! Uses `BACKLOG_DATABASE_URL` when set (any backend), else a SQLite file in a temporary folder.

use std::time::Duration;

use backlog::{
    CancellationToken, Client, JobContext, MaintenanceConfig, Outcome, PeriodicJob, Schedule,
    Worker,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = std::env::var("BACKLOG_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("example.db").display()));
    let client = Client::connect(&url).await?;
    client.migrate().await?;
    client.subscribe("orders", "billing").await?;
    client.subscribe("orders", "shipping").await?;

    // Every second (a cron expression works too: Schedule::cron("0 3 * * *")?).
    let tick = PeriodicJob::new(
        "heartbeat-report",
        Schedule::Every(Duration::from_secs(1)),
        client.new_job("reports", &serde_json::json!({"report": "hourly"}))?,
    );
    let worker = Worker::builder(client)
        .queue("billing", 2)
        .queue("shipping", 2)
        .queue("reports", 1)
        .fallback_handler(|ctx: JobContext| async move {
            let queue = ctx.job().queue.clone();
            Ok(Outcome::CompleteWith(
                serde_json::json!({ "handled_by": queue }),
            ))
        })
        .periodic(tick)
        .configure(|c| {
            c.maintenance = Some(MaintenanceConfig {
                leader_ttl: Duration::from_secs(2),
                renew_every: Duration::from_millis(200),
                ..MaintenanceConfig::default()
            })
        })
        .build()?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (w, s) = (worker.clone(), shutdown.clone());
        async move { w.run(s).await }
    });

    let client = worker.client();
    let copies = client
        .publish(
            "orders",
            client.new_job("orders", &serde_json::json!({"order": 42}))?,
        )
        .await?;
    for copy in &copies {
        // Works across processes: the outcome is read from the database.
        let job = client
            .wait_for(copy.id, Duration::from_secs(10))
            .await?
            .expect("kept");
        println!(
            "copy {} in {}: {:?}, result {}",
            job.id,
            job.queue,
            job.state,
            job.result.unwrap_or_default()
        );
    }

    tokio::time::sleep(Duration::from_millis(2500)).await;
    shutdown.cancel();
    running.await??;
    let reports = backlog::testing::jobs_in(client, "reports", None).await?;
    println!("periodic job fired {} times in 2.5 s", reports.len());
    assert_eq!(copies.len(), 2);
    assert!(!reports.is_empty());
    Ok(())
}
