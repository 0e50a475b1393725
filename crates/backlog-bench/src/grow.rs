//! `backlog bench --grow`: cost as work grows. Drain throughput through the worker runtime with
//! a queue holding each of several depths (the drained jobs are topped up between rounds, so the
//! depth holds), and the hot table's rows and bytes before, during and after a long steady run
//! whose completed jobs are kept and then pruned by the leader: pruning keeps the table small.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backlog::{CancellationToken, Client, MaintenanceConfig, QueueName, QueueSettings, Retention};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::baseline::{Baseline, Sizes};
use crate::util::{median, noop_worker, phase};

/// What `--grow` runs with.
#[derive(Debug, Clone, Serialize)]
pub struct GrowParams {
    pub backend: String,
    pub levels: Vec<u64>,
    pub drain_jobs: u64,
    pub rounds: u64,
    pub concurrency: u64,
    pub run_secs: f64,
    pub run_rate: u64,
    pub keep_completed_ms: u64,
    /// Shards of the grown queue and of the steady run's (`--shards`).
    pub shards: u16,
}

/// One queue depth.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    /// Jobs queued when each round starts.
    pub queued: u64,
    /// Median drain rate over the rounds (jobs/s).
    pub jobs_per_s: f64,
    /// Each round's rate.
    pub rounds_per_s: Vec<f64>,
    /// The hot table once the depth was reached.
    pub sizes: Sizes,
}

/// The steady run with pruning.
#[derive(Debug, Clone, Serialize)]
pub struct LongRun {
    pub secs: f64,
    /// Jobs completed during the run (the rows the table would have gained without pruning).
    pub jobs: u64,
    pub jobs_per_s: f64,
    pub before: Sizes,
    /// Sampled every few seconds during the run.
    pub during: Vec<Sizes>,
    pub after: Sizes,
}

/// The figures (`--json` prints this).
#[derive(Debug, Clone, Serialize)]
pub struct GrowReport {
    pub levels: Vec<Level>,
    /// Throughput at the deepest level over that at the shallowest.
    pub deepest_to_shallowest_ratio: f64,
    pub long_run: LongRun,
    pub params: GrowParams,
}

/// Runs both parts; `q` names the benchmark's queues.
pub async fn run(
    client: &Arc<Client>,
    base: &Baseline,
    q: &dyn Fn(&str) -> String,
    p: &GrowParams,
    bar: &ProgressBar,
) -> anyhow::Result<GrowReport> {
    let long_run = long_run(client, base, &q("grow_steady"), p, bar).await?;

    let queue = q("grow");
    let mut s = QueueSettings::defaults(QueueName::new(queue.clone())?);
    s.retention = Retention::Delete;
    s.shards = p.shards;
    client.queue_configure(&s).await?;
    let mut queued = 0u64;
    let mut levels = vec![];
    for &depth in &p.levels {
        // Each depth starts from a vacuumed table (PostgreSQL), as autovacuum or the leader
        // would leave it: dead rows of an earlier run or depth would otherwise slow the claims
        // of whichever depth comes first.
        base.vacuum().await?;
        top_up(client, &queue, depth - queued.min(depth), bar, depth).await?;
        queued = queued.max(depth);
        let sizes = base.sizes().await?;
        let drain = p.drain_jobs.min(depth);
        let mut rates = vec![];
        for round in 1..=p.rounds {
            phase(
                bar,
                &format!("{depth} queued: drain round {round}/{}", p.rounds),
                drain,
            );
            let (done, secs) = drain_some(client, &queue, drain, p.concurrency, bar).await?;
            rates.push(done as f64 / secs);
            queued -= done;
            top_up(client, &queue, depth - queued, bar, depth).await?;
            queued = depth;
        }
        levels.push(Level {
            queued: depth,
            jobs_per_s: median(&rates),
            rounds_per_s: rates,
            sizes,
        });
    }
    let first = levels.first().map_or(0.0, |l| l.jobs_per_s);
    let last = levels.last().map_or(0.0, |l| l.jobs_per_s);
    Ok(GrowReport {
        levels,
        deepest_to_shallowest_ratio: last / first,
        long_run,
        params: p.clone(),
    })
}

/// Enqueues `n` no-op jobs in batches of 1000.
async fn top_up(
    client: &Arc<Client>,
    queue: &str,
    n: u64,
    bar: &ProgressBar,
    depth: u64,
) -> anyhow::Result<()> {
    if n == 0 {
        return Ok(());
    }
    phase(bar, &format!("{depth} queued: enqueue"), n);
    let mut i = 0;
    while i < n {
        let k = 1000.min(n - i);
        let jobs = (i..i + k)
            .map(|n| client.new_job(queue, &serde_json::json!({ "i": n })))
            .collect::<backlog::Result<Vec<_>>>()?;
        client.enqueue_many(jobs).await?;
        i += k;
        bar.inc(k);
    }
    Ok(())
}

/// Runs a no-op worker until it has completed `n` jobs; how many it completed (a few more may
/// finish while it stops) and how long it took.
async fn drain_some(
    client: &Arc<Client>,
    queue: &str,
    n: u64,
    concurrency: u64,
    bar: &ProgressBar,
) -> anyhow::Result<(u64, f64)> {
    let done = Arc::new(AtomicU64::new(0));
    let worker = noop_worker(client, queue, concurrency, done.clone(), bar)?.build()?;
    let stop = CancellationToken::new();
    let started = Instant::now();
    let running = tokio::spawn({
        let (w, s) = (worker.clone(), stop.clone());
        async move { w.run(s).await }
    });
    while done.load(Ordering::Relaxed) < n {
        if running.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    stop.cancel();
    let report = running.await??;
    Ok((report.completed, started.elapsed().as_secs_f64()))
}

/// A steady producer and a worker for `run_secs`, completed jobs kept `keep_completed_ms` and
/// pruned by the leader.
async fn long_run(
    client: &Arc<Client>,
    base: &Baseline,
    queue: &str,
    p: &GrowParams,
    bar: &ProgressBar,
) -> anyhow::Result<LongRun> {
    let mut s = QueueSettings::defaults(QueueName::new(queue)?);
    s.retention = Retention::Keep;
    s.shards = p.shards;
    client.queue_configure(&s).await?;
    let before = base.sizes().await?;
    phase(bar, "steady run, completed jobs pruned", 0);
    let done = Arc::new(AtomicU64::new(0));
    let maintenance = MaintenanceConfig {
        leader_ttl: Duration::from_secs(2),
        renew_every: Duration::from_millis(500),
        prune_every: Duration::from_secs(1),
        keep_completed: Duration::from_millis(p.keep_completed_ms),
        ..MaintenanceConfig::default()
    };
    let worker = noop_worker(client, queue, p.concurrency, done.clone(), bar)?
        .configure(|c| c.maintenance = Some(maintenance))
        .build()?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (w, s) = (worker.clone(), shutdown.clone());
        async move { w.run(s).await }
    });
    let window = Duration::from_secs_f64(p.run_secs);
    let sample_every = (window / 6).max(Duration::from_millis(500));
    let started = Instant::now();
    let mut next_sample = started + sample_every;
    let mut during = vec![];
    let mut n = 0u64;
    // A steady rate below what the worker can do, so rows stay only as long as retention says.
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let per_tick = (p.run_rate / 20).max(1);
    while started.elapsed() < window {
        tick.tick().await;
        let jobs = (0..per_tick)
            .map(|i| client.new_job(queue, &serde_json::json!({ "i": n + i })))
            .collect::<backlog::Result<Vec<_>>>()?;
        client.enqueue_many(jobs).await?;
        n += per_tick;
        if Instant::now() >= next_sample {
            during.push(base.sizes().await?);
            next_sample += sample_every;
        }
    }
    let jobs = done.load(Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();
    shutdown.cancel();
    running.await??;
    let after = base.sizes().await?;
    Ok(LongRun {
        secs,
        jobs,
        jobs_per_s: jobs as f64 / secs,
        before,
        during,
        after,
    })
}

/// The report for people.
pub fn human(r: &GrowReport) -> String {
    let p = &r.params;
    let mut s = format!(
        "backlog bench --grow on {}: drain of {} jobs per round, concurrency {}, median of {} \
         rounds\n\n{:>12} {:>12} {:>12} {:>14} {:>14}\n",
        p.backend,
        p.drain_jobs,
        p.concurrency,
        p.rounds,
        "queued",
        "drain",
        "table rows",
        "table bytes",
        "index bytes"
    );
    for l in &r.levels {
        s.push_str(&format!(
            "{:>12} {:>10.0}/s {:>12} {:>14} {:>14}\n",
            l.queued, l.jobs_per_s, l.sizes.rows, l.sizes.table_bytes, l.sizes.index_bytes
        ));
    }
    s.push_str(&format!(
        "deepest / shallowest: {:.0}%\n\n",
        100.0 * r.deepest_to_shallowest_ratio
    ));
    let lr = &r.long_run;
    s.push_str(&format!(
        "steady run: {:.0} s at {}/s, {} jobs completed ({:.0}/s), kept {} ms then pruned\n",
        lr.secs, p.run_rate, lr.jobs, lr.jobs_per_s, p.keep_completed_ms
    ));
    let row = |name: &str, z: &Sizes| {
        format!(
            "{name:>12} {:>12} {:>14} {:>14}\n",
            z.rows, z.table_bytes, z.index_bytes
        )
    };
    s.push_str(&row("before", &lr.before));
    for (i, z) in lr.during.iter().enumerate() {
        s.push_str(&row(&format!("during #{}", i + 1), z));
    }
    s.push_str(&row("after", &lr.after));
    s
}
