//! `backlog demo`: the main job end to end, on the configured database, through the worker
//! runtime: a batch of typed jobs, four concurrent workers, retries with backoff, a dead letter.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use backlog::{
    CancellationToken, Client, DrainMode, JobArgs, JobContext, JobState, Outcome, QueueName,
    QueueSettings, Worker,
};
use serde::{Deserialize, Serialize};

use crate::output;

/// The demo's job: resize image `n`.
#[derive(Debug, Serialize, Deserialize)]
struct Resize {
    n: u32,
    /// Fails its first attempt.
    flaky: bool,
    /// Always fails: ends dead.
    broken: bool,
}

impl JobArgs for Resize {
    const KIND: &'static str = "resize";
    const QUEUE: &'static str = "demo";
}

/// Runs the demo.
pub async fn run(client: Client, jobs: u32) -> anyhow::Result<ExitCode> {
    let r = client.migrate().await?;
    println!("1. migrate: schema at version {}", r.current);
    let queue = QueueName::new("demo")?;
    let mut s = QueueSettings::defaults(queue.clone());
    s.max_attempts = 3;
    s.backoff_base = Duration::from_millis(50);
    s.backoff_max = Duration::from_millis(200);
    client.queue_configure(&s).await?;
    println!("2. queue 'demo': 3 attempts, retries after 50ms doubling to 200ms");

    let batch = (0..jobs)
        .map(|n| {
            client.job_for(&Resize {
                n,
                flaky: n % 7 == 3,
                broken: n == 13,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let started = std::time::Instant::now();
    let ids = client.enqueue_many(batch).await?;
    println!(
        "3. enqueued {} jobs in one batch (ids {}..={})",
        ids.len(),
        ids[0].id,
        ids[ids.len() - 1].id
    );

    let client = Arc::new(client);
    let worker = Worker::builder(client.clone())
        .queue("demo", 4)
        .handler(|ctx: JobContext, job: Resize| async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if job.broken || (job.flaky && ctx.attempt() == 1) {
                println!(
                    "   job {} (image {}) failed attempt {}",
                    ctx.id(),
                    job.n,
                    ctx.attempt()
                );
                return Err(format!("image {} failed on attempt {}", job.n, ctx.attempt()).into());
            }
            Ok(Outcome::CompleteWith(
                serde_json::json!({ "thumbnail": format!("img-{}-small.png", job.n) }),
            ))
        })
        .configure(|c| {
            c.drain = Some(DrainMode::All);
            c.maintenance = None;
        })
        .build()?;
    let report = worker.run(CancellationToken::new()).await?;
    println!(
        "4. four concurrent workers: {} completed, {} failed attempts, in {:?}",
        report.completed,
        report.failed,
        started.elapsed()
    );
    let stats = client.stats(Some(&queue)).await?;
    println!("5. final state of queue 'demo':");
    print!("{}", output::stats(&stats));
    // This run's dead job (image 13), not one an earlier run left in the queue.
    let broken = match ids.get(13) {
        Some(o) => Some(client.job(o.id).await?),
        None => None,
    };
    if let Some(j) = broken.filter(|j| j.state == JobState::Dead) {
        println!("6. the dead job, as `backlog job show {}` prints it:", j.id);
        print!("{}", output::job(&j, client.now()));
    }
    client.close().await;
    Ok(ExitCode::SUCCESS)
}
