//! Seed S2 replay: many concurrent jobs that each take a while (a sleep). What it shows is what
//! the queue adds around each job: the time from its claim to its completion, as the database
//! recorded them, against the job's own duration. Dequeuing must add no contention.

use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog::{CancellationToken, Client, DrainMode, JobContext, Outcome, Worker};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::baseline::Baseline;
use crate::util::phase;

/// What the replay measured.
#[derive(Debug, Clone, Serialize)]
pub struct S2 {
    /// Mean time from claim to completion, in milliseconds.
    pub mean_ms: f64,
    /// Its 99th percentile.
    pub p99_ms: f64,
    /// The whole run, first claim to last completion, in seconds.
    pub wall_s: f64,
}

/// Enqueues `jobs` jobs, then works them `concurrency` at a time with a handler that sleeps
/// `sleep`, and reads back when each was claimed and completed.
pub async fn replay(
    client: &Arc<Client>,
    base: &Baseline,
    queue: &str,
    (jobs, concurrency, sleep): (u64, u64, Duration),
    bar: &ProgressBar,
) -> anyhow::Result<S2> {
    phase(bar, "S2 replay: enqueue", jobs);
    let mut i = 0;
    while i < jobs {
        let k = 1000.min(jobs - i);
        let batch = (i..i + k)
            .map(|n| client.new_job(queue, &serde_json::json!({ "i": n })))
            .collect::<backlog::Result<Vec<_>>>()?;
        client.enqueue_many(batch).await?;
        i += k;
        bar.inc(k);
    }
    phase(
        bar,
        &format!("S2 replay: {concurrency} at once, {sleep:?} each"),
        jobs,
    );
    let b = bar.clone();
    let worker = Worker::builder(client.clone())
        .queue(queue, concurrency as usize)
        .fallback_handler(move |_ctx: JobContext| {
            let b = b.clone();
            async move {
                tokio::time::sleep(sleep).await;
                b.inc(1);
                Ok(Outcome::Complete)
            }
        })
        .configure(|c| {
            c.maintenance = None;
            c.drain = Some(DrainMode::All);
        })
        .build()?;
    let started = Instant::now();
    let report = worker.run(CancellationToken::new()).await?;
    let wall_s = started.elapsed().as_secs_f64();
    if report.completed != jobs {
        anyhow::bail!("the runtime completed {} of {jobs} jobs", report.completed);
    }
    let mut micros = base.claim_to_completion(queue).await?;
    if micros.len() as u64 != jobs {
        anyhow::bail!("{} of {jobs} jobs are recorded as completed", micros.len());
    }
    micros.sort_unstable();
    let mean = micros.iter().sum::<i64>() as f64 / micros.len() as f64;
    let p99 = micros[((micros.len() - 1) as f64 * 0.99).round() as usize];
    Ok(S2 {
        mean_ms: mean / 1000.0,
        p99_ms: p99 as f64 / 1000.0,
        wall_s,
    })
}
