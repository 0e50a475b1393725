//! A typed job and its worker: enqueue many, work them with a concurrency of 4, report progress
//! and store a result on each job, then stop once the queue is drained.
//!
//!     cargo run -p backlog --example typed_worker
//!
//! Uses `BACKLOG_DATABASE_URL` when set (any backend), else a SQLite file in a temporary folder.

use backlog::{Client, DrainMode, JobArgs, JobContext, JobState, Outcome, StateFilter, Worker};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Resize {
    image: String,
    width: u32,
}

impl JobArgs for Resize {
    const KIND: &'static str = "resize";
    const QUEUE: &'static str = "images";
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = std::env::var("BACKLOG_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("example.db").display()));
    let client = Client::connect(&url).await?;
    client.migrate().await?;

    let jobs = (1..=20)
        .map(|i| {
            client.job_for(&Resize {
                image: format!("photo-{i}.png"),
                width: 64 * i,
            })
        })
        .collect::<backlog::Result<Vec<_>>>()?;
    let ids: Vec<i64> = client
        .enqueue_many(jobs)
        .await?
        .iter()
        .map(|o| o.id)
        .collect();

    let worker = Worker::builder(client)
        .queue("images", 4)
        .handler(|ctx: JobContext, job: Resize| async move {
            ctx.progress(&serde_json::json!({"step": "decoding"}))
                .await?;
            if job.width == 0 {
                return Ok(Outcome::Discard("nothing to resize".into()));
            }
            let bytes = job.width as u64 * job.width as u64 * 4;
            Ok(Outcome::CompleteWith(
                serde_json::json!({ "image": job.image, "bytes": bytes }),
            ))
        })
        .configure(|c| c.drain = Some(DrainMode::All))
        .build()?;
    let report = worker.run(backlog::CancellationToken::new()).await?;
    println!("completed {} jobs", report.completed);

    let client = worker.client();
    let first = client.job(ids[0]).await?;
    assert_eq!(first.state, JobState::Completed);
    println!(
        "job {}: result {}",
        first.id,
        first.result.unwrap_or_default()
    );
    let done = backlog::testing::jobs_in(
        client,
        "images",
        Some(StateFilter::Stored(JobState::Completed)),
    )
    .await?;
    assert_eq!(done.len(), ids.len());
    Ok(())
}
