//! `backlog bench --flow`: what flow control costs when used.
//!
//! - **Grouped drain**: the same jobs drained by the worker runtime as plain jobs and spread over
//!   ordered groups (job i in group i mod groups, one at a time per group), in rounds that
//!   alternate which goes first; the ratio is the median of each round's own.
//! - **Global limit**: jobs of `sleep` each, worked by two workers (each with its own pool, as
//!   two processes) with more slots between them than the queue's global limit; the jobs running
//!   in the database are sampled every 50 ms. The limit should be full, and never passed.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use backlog::{
    CancellationToken, Client, DrainMode, GroupKey, JobContext, Outcome, QueueName, QueueSettings,
    Worker,
};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::baseline::Baseline;
use crate::util::{median, noop_worker, phase};

/// What `--flow` runs with.
#[derive(Debug, Clone, Serialize)]
pub struct FlowParams {
    pub backend: String,
    /// Jobs per drain.
    pub drain_jobs: u64,
    /// Ordered groups the grouped drain spreads them over.
    pub groups: u64,
    pub rounds: u64,
    pub concurrency: u64,
    /// The global limit of the second part.
    pub limit: u64,
    /// Jobs of the second part, and how long each sleeps.
    pub limit_jobs: u64,
    pub sleep_ms: u64,
    /// Slots of each of its two workers.
    pub worker_slots: u64,
}

/// The figures (`--json` prints this).
#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    /// Median drain rates (jobs/s) and each round's.
    pub plain_per_s: f64,
    pub grouped_per_s: f64,
    pub plain_rounds_per_s: Vec<f64>,
    pub grouped_rounds_per_s: Vec<f64>,
    /// Grouped over plain, the median of each round's own ratio.
    pub grouped_ratio: f64,
    /// Most jobs seen running at once under the global limit.
    pub limit_most_running: i64,
    /// Median of the samples taken while jobs were left to start (first and last second left
    /// out: filling up and running dry).
    pub limit_median_running: f64,
    /// Share of those samples with the limit exactly full.
    pub limit_full_share: f64,
    pub limit_samples: usize,
    /// The run's length, and what a full limit would take (jobs / limit × sleep).
    pub limit_secs: f64,
    pub limit_ideal_secs: f64,
    pub params: FlowParams,
}

pub async fn run(
    client: &Arc<Client>,
    base: &Baseline,
    url: &str,
    q: &dyn Fn(&str) -> String,
    p: &FlowParams,
    bar: &ProgressBar,
) -> anyhow::Result<FlowReport> {
    let (mut plain, mut grouped, mut ratios) = (vec![], vec![], vec![]);
    for round in 0..p.rounds {
        let tag = format!("round {}/{}", round + 1, p.rounds);
        let one = |grouped: bool| drain(client, base, q, p, grouped, bar, tag.clone());
        let (a, b) = match round % 2 {
            0 => (one(false).await?, one(true).await?),
            _ => {
                let b = one(true).await?;
                (one(false).await?, b)
            }
        };
        plain.push(a);
        grouped.push(b);
        ratios.push(b / a);
    }
    base.vacuum().await?;
    let limited = limit(client, url, &q("limit"), p, bar).await?;
    Ok(FlowReport {
        plain_per_s: median(&plain),
        grouped_per_s: median(&grouped),
        grouped_ratio: median(&ratios),
        plain_rounds_per_s: plain,
        grouped_rounds_per_s: grouped,
        limit_most_running: limited.most,
        limit_median_running: limited.median,
        limit_full_share: limited.full_share,
        limit_samples: limited.samples,
        limit_secs: limited.secs,
        limit_ideal_secs: (p.limit_jobs as f64 / p.limit as f64).ceil() * p.sleep_ms as f64 / 1e3,
        params: p.clone(),
    })
}

/// Enqueues `drain_jobs` (in groups or not, untimed) and drains them with the runtime.
async fn drain(
    client: &Arc<Client>,
    base: &Baseline,
    q: &dyn Fn(&str) -> String,
    p: &FlowParams,
    grouped: bool,
    bar: &ProgressBar,
    tag: String,
) -> anyhow::Result<f64> {
    let queue = q(if grouped { "grouped" } else { "plain" });
    let what = if grouped { "grouped" } else { "plain" };
    phase(bar, &format!("{tag}: enqueue {what}"), p.drain_jobs);
    let mut i = 0;
    while i < p.drain_jobs {
        let k = 1000.min(p.drain_jobs - i);
        let mut jobs = Vec::with_capacity(k as usize);
        for n in i..i + k {
            let job = client.new_job(&queue, &serde_json::json!({ "i": n }))?;
            jobs.push(match grouped {
                true => job.in_group(GroupKey::new(format!("g{}", n % p.groups))?),
                false => job,
            });
        }
        client.enqueue_many(jobs).await?;
        i += k;
        bar.inc(k);
    }
    // As the main drain phase: no dead rows of earlier phases, no checkpoint they set off.
    base.vacuum().await?;
    base.checkpoint().await?;
    phase(bar, &format!("{tag}: drain {what}"), p.drain_jobs);
    let done = Arc::new(AtomicU64::new(0));
    let worker = noop_worker(client, &queue, p.concurrency, done, bar)?
        .configure(|c| c.drain = Some(DrainMode::All))
        .build()?;
    let started = Instant::now();
    let report = worker.run(CancellationToken::new()).await?;
    let rate = report.completed as f64 / started.elapsed().as_secs_f64();
    if report.completed != p.drain_jobs {
        anyhow::bail!("drained {} of {} jobs", report.completed, p.drain_jobs);
    }
    Ok(rate)
}

struct Limited {
    most: i64,
    median: f64,
    full_share: f64,
    samples: usize,
    secs: f64,
}

/// Jobs that sleep, under a global limit, worked by two workers with more slots than it.
async fn limit(
    client: &Arc<Client>,
    url: &str,
    queue: &str,
    p: &FlowParams,
    bar: &ProgressBar,
) -> anyhow::Result<Limited> {
    let name = QueueName::new(queue)?;
    client
        .queue_configure(&QueueSettings {
            global_concurrency: Some(p.limit as u32),
            ..QueueSettings::defaults(name.clone())
        })
        .await?;
    let jobs = (0..p.limit_jobs)
        .map(|n| client.new_job(queue, &serde_json::json!({ "i": n })))
        .collect::<backlog::Result<Vec<_>>>()?;
    client.enqueue_many(jobs).await?;
    phase(
        bar,
        &format!(
            "global limit {}: {} jobs of {} ms",
            p.limit, p.limit_jobs, p.sleep_ms
        ),
        p.limit_jobs,
    );
    let started = Instant::now();
    let mut runs = vec![];
    for _ in 0..2 {
        let sleep = Duration::from_millis(p.sleep_ms);
        let bar = bar.clone();
        let worker = Worker::builder(Client::connect(url).await?)
            .queue(queue, p.worker_slots as usize)
            .fallback_handler(move |_ctx: JobContext| {
                let bar = bar.clone();
                async move {
                    tokio::time::sleep(sleep).await;
                    bar.inc(1);
                    Ok(Outcome::Complete)
                }
            })
            .configure(|c| {
                c.drain = Some(DrainMode::All);
                c.maintenance = None;
            })
            .build()?;
        runs.push(tokio::spawn(async move {
            worker.run(CancellationToken::new()).await
        }));
    }
    let mut samples: Vec<(f64, i64)> = vec![];
    while !runs.iter().all(|r| r.is_finished()) {
        let running = client.queue_flow(&name).await?.running;
        samples.push((started.elapsed().as_secs_f64(), running));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let mut completed = 0;
    for r in runs {
        completed += r.await??.completed;
    }
    if completed != p.limit_jobs {
        anyhow::bail!("completed {completed} of {} jobs", p.limit_jobs);
    }
    let most = samples.iter().map(|s| s.1).max().unwrap_or(0);
    // While jobs were left to start: after the first second, before the last one.
    let steady: Vec<f64> = (samples.iter())
        .filter(|(t, _)| *t > 1.0 && *t < secs - 1.0 - p.sleep_ms as f64 / 1e3)
        .map(|s| s.1 as f64)
        .collect();
    let full = steady.iter().filter(|&&r| r == p.limit as f64).count();
    Ok(Limited {
        most,
        median: median(&steady),
        full_share: full as f64 / steady.len().max(1) as f64,
        samples: steady.len(),
        secs,
    })
}

pub fn human(r: &FlowReport) -> String {
    let p = &r.params;
    format!(
        "flow control on {} ({} rounds, concurrency {})\n\
         drain of {} jobs, plain                  {:>9.0} jobs/s\n\
         drain of {} jobs in {} ordered groups    {:>9.0} jobs/s   ratio {:.2} (median of rounds)\n\
         global limit {}: {} jobs of {} ms on 2 workers x {} slots\n\
         \x20 running at once: most {}, median {:.0}, full in {:.0}% of {} samples\n\
         \x20 took {:.1} s (a full limit takes {:.1} s)\n",
        p.backend,
        p.rounds,
        p.concurrency,
        p.drain_jobs,
        r.plain_per_s,
        p.drain_jobs,
        p.groups,
        r.grouped_per_s,
        r.grouped_ratio,
        p.limit,
        p.limit_jobs,
        p.sleep_ms,
        p.worker_slots,
        r.limit_most_running,
        r.limit_median_running,
        r.limit_full_share * 100.0,
        r.limit_samples,
        r.limit_secs,
        r.limit_ideal_secs,
    )
}
