//! `backlog bench --soak` and `--overload`: long runs sampled window by window.
//!
//! The soak runs a steady producer at `--soak-rate` jobs/s and a worker whose leader prunes
//! completed jobs, and records for each window the process's RSS, its pool's connections and the
//! server's, the job table's rows and bytes, the old row versions not yet reclaimed, and the
//! enqueue-to-start latency; then it says whether each is flat from the end of the settling
//! time to the last window. `--hold-transaction` runs the same with another session holding a
//! transaction open throughout, which shows what a forgotten transaction costs.
//!
//! The overload run enqueues `--overload` jobs from more producers than the pool has
//! connections, as fast as they go, while a worker drains them: the pool is the back-pressure,
//! the jobs wait in the database, and the process's memory must stay flat. It starts on a freshly
//! vacuumed and analyzed job table (on PostgreSQL; empty, on a database of its own) and lets the
//! worker poll it for a second before the first job: the worker's plans are made on the
//! statistics of an empty table, the case where a plan could go bad once the table fills.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backlog::{
    CancellationToken, Client, JobContext, MaintenanceConfig, Outcome, QueueName, QueueSettings,
    Retention, SqlBackend, Worker,
};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::args::HoldKind;
use crate::baseline::{Baseline, Sizes};
use crate::util::{median, phase};

/// What the soak runs with.
#[derive(Debug, Clone, Serialize)]
pub struct SoakParams {
    pub backend: String,
    pub secs: f64,
    pub rate: u64,
    pub window_secs: f64,
    pub settle_secs: f64,
    pub keep_completed_secs: f64,
    pub concurrency: u64,
    pub hold_transaction: bool,
    /// What the held session does (null: none held).
    pub hold_kind: Option<HoldKind>,
    /// Whether the held session runs on another server (a replica) than the one under test.
    pub hold_elsewhere: bool,
    #[serde(skip)]
    pub hold_url: Option<String>,
}

/// What the overload run runs with.
#[derive(Debug, Clone, Serialize)]
pub struct OverloadParams {
    pub backend: String,
    pub jobs: u64,
    pub producers: u64,
    pub batch: u64,
    pub pool_connections: u32,
    pub concurrency: u64,
    pub window_secs: f64,
}

/// One window of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Seconds from the start to the end of this window.
    pub at_s: f64,
    pub enqueued: u64,
    pub completed: u64,
    /// Acknowledged and not yet completed, at the end of the window.
    pub waiting: u64,
    /// Enqueue to handler start, of the jobs started in this window (null when none).
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// This process's resident memory.
    pub rss_bytes: u64,
    /// Connections this process's pool holds open.
    pub pool_connections: u32,
    /// Sockets this process holds open (its database connections, the LISTEN one included).
    pub sockets: u64,
    /// Sessions on the database server, of every client (SQLite: the pool's).
    pub server_connections: i64,
    /// The job table's bytes and its indexes', the mean of the window's looks (one every
    /// [`LOOK_EVERY`] and one at its end: a table that the leader empties now and then is a saw
    /// whose teeth one look would catch anywhere), and its rows at the end.
    pub sizes: Sizes,
    /// Old row versions not reclaimed yet (see `Baseline::garbage`).
    pub garbage: i64,
    /// Calls that failed in this window (each one retried).
    pub errors: u64,
}

/// One measure's course from the settled part's first third to its last.
#[derive(Debug, Clone, Serialize)]
pub struct Trend {
    pub measure: &'static str,
    /// Median over the first third of the settled windows.
    pub first: f64,
    /// Median over the last third.
    pub last: f64,
    /// How far `last` may exceed `first` and still count as flat.
    pub allowed: f64,
    pub flat: bool,
}

/// The soak's figures (`--json` prints this).
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub windows: Vec<Window>,
    pub trends: Vec<Trend>,
    /// Every trend flat.
    pub flat: bool,
    pub jobs_enqueued: u64,
    pub jobs_completed: u64,
    pub params: SoakParams,
}

/// The overload run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct OverloadReport {
    pub windows: Vec<Window>,
    /// Seconds until every job was acknowledged.
    pub enqueue_secs: f64,
    pub enqueue_per_s: f64,
    /// Seconds until every acknowledged job was completed.
    pub total_secs: f64,
    pub drain_per_s: f64,
    pub acknowledged: u64,
    pub completed: u64,
    /// Failed calls by error kind (each retried; only a pool timeout is known to change nothing,
    /// so the others are retried under the same unique key).
    pub errors: Vec<(String, u64)>,
    /// Largest pool the process opened.
    pub pool_connections_max: u32,
    /// RSS at the end of the first window and its largest over the run.
    pub rss_first_bytes: u64,
    pub rss_max_bytes: u64,
    pub waiting_max: u64,
    pub params: OverloadParams,
}

/// What the handler and the producers count, shared with the sampler.
#[derive(Default)]
struct Counters {
    enqueued: AtomicU64,
    completed: AtomicU64,
    errors: AtomicU64,
    /// Enqueue-to-start latencies (µs) since the last sample.
    latencies: Mutex<Vec<i64>>,
}

/// How often the soak looks at the job table's size within a window.
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// Reads the counters and the database into windows.
struct Sampler<'a> {
    client: &'a Client,
    base: &'a Baseline,
    counters: Arc<Counters>,
    started: Instant,
    last: (u64, u64, u64),
    /// The sizes looked at in this window so far.
    looks: Vec<Sizes>,
    windows: Vec<Window>,
}

impl<'a> Sampler<'a> {
    fn new(client: &'a Client, base: &'a Baseline, counters: Arc<Counters>) -> Self {
        Sampler {
            client,
            base,
            counters,
            started: Instant::now(),
            last: (0, 0, 0),
            looks: vec![],
            windows: vec![],
        }
    }

    /// Looks at the job table's size, for the window's mean.
    async fn look(&mut self) -> anyhow::Result<()> {
        self.looks.push(self.base.sizes().await?);
        Ok(())
    }

    async fn sample(&mut self) -> anyhow::Result<&Window> {
        let c = &self.counters;
        let (enq, done, errs) = (
            c.enqueued.load(Ordering::Relaxed),
            c.completed.load(Ordering::Relaxed),
            c.errors.load(Ordering::Relaxed),
        );
        let mut lat = std::mem::take(&mut *c.latencies.lock().expect("lock"));
        lat.sort_unstable();
        let pct = |q: f64| {
            (!lat.is_empty())
                .then(|| lat[((lat.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0)
        };
        self.look().await?;
        let looks = std::mem::take(&mut self.looks);
        let mean = |f: fn(&Sizes) -> i64| looks.iter().map(f).sum::<i64>() / looks.len() as i64;
        let sizes = Sizes {
            rows: looks.last().expect("looked").rows,
            table_bytes: mean(|s| s.table_bytes),
            index_bytes: mean(|s| s.index_bytes),
            kept_bytes: mean(|s| s.kept_bytes),
        };
        let w = Window {
            at_s: self.started.elapsed().as_secs_f64(),
            enqueued: enq - self.last.0,
            completed: done - self.last.1,
            waiting: enq.saturating_sub(done),
            latency_p50_ms: pct(0.50),
            latency_p99_ms: pct(0.99),
            rss_bytes: rss_bytes(),
            pool_connections: pool_size(self.client),
            sockets: sockets(),
            server_connections: self.base.server_connections().await?,
            sizes,
            garbage: self.base.garbage().await?,
            errors: errs - self.last.2,
        };
        self.last = (enq, done, errs);
        self.windows.push(w);
        Ok(self.windows.last().expect("pushed"))
    }
}

/// This process's resident set (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Sockets among this process's open files (Linux; 0 elsewhere).
fn sockets() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| {
        dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count() as u64
    })
}

fn pool_size(client: &Client) -> u32 {
    match client.sql() {
        Some(SqlBackend::Sqlite(b)) => b.pool().size(),
        Some(SqlBackend::Postgres(b)) => b.pool().size(),
        Some(SqlBackend::MySql(b)) => b.pool().size(),
        _ => 0,
    }
}

/// A worker whose handler counts and records each job's enqueue-to-start latency (the payload's
/// `t`, in µs of this machine's clock).
fn counting_worker(
    client: &Arc<Client>,
    queue: &str,
    concurrency: u64,
    counters: &Arc<Counters>,
    maintenance: Option<MaintenanceConfig>,
) -> anyhow::Result<Worker> {
    let c = counters.clone();
    Ok(Worker::builder(client.clone())
        .queue(queue, concurrency as usize)
        .fallback_handler(move |ctx: JobContext| {
            let now = backlog::Clock::now(&backlog::SystemClock);
            let sent: serde_json::Value =
                serde_json::from_str(&ctx.job().payload).unwrap_or_default();
            if let Some(t) = sent["t"].as_i64() {
                c.latencies.lock().expect("lock").push(now - t);
            }
            c.completed.fetch_add(1, Ordering::Relaxed);
            async { Ok(Outcome::Complete) }
        })
        .configure(|w| w.maintenance = maintenance)
        .build()?)
}

/// The soak.
pub async fn soak(
    client: &Arc<Client>,
    base: &Baseline,
    queue: &str,
    p: &SoakParams,
    bar: &ProgressBar,
) -> anyhow::Result<SoakReport> {
    let mut s = QueueSettings::defaults(QueueName::new(queue)?);
    s.retention = Retention::Keep;
    client.queue_configure(&s).await?;
    let held = match p.hold_transaction {
        true => Some(
            base.hold_transaction(
                p.hold_kind.unwrap_or(HoldKind::Snapshot),
                p.hold_url.as_deref(),
            )
            .await?,
        ),
        false => None,
    };
    let counters = Arc::new(Counters::default());
    let maintenance = MaintenanceConfig {
        prune_every: Duration::from_secs(5),
        keep_completed: Duration::from_secs_f64(p.keep_completed_secs),
        warn_transaction_age: Some(Duration::from_secs(60)),
        ..MaintenanceConfig::default()
    };
    let worker = counting_worker(client, queue, p.concurrency, &counters, Some(maintenance))?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (w, s) = (worker.clone(), shutdown.clone());
        async move { w.run(s).await }
    });
    let windows = (p.secs / p.window_secs).round().max(1.0) as u64;
    phase(bar, "soak: windows", windows);
    let mut sampler = Sampler::new(client, base, counters.clone());
    let window = Duration::from_secs_f64(p.window_secs);
    let mut next_sample = sampler.started + window;
    let mut next_look = sampler.started + LOOK_EVERY;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let per_tick = (p.rate / 20).max(1);
    let mut n = 0u64;
    while (sampler.windows.len() as u64) < windows {
        tick.tick().await;
        let t = backlog::Clock::now(&backlog::SystemClock);
        let jobs = (0..per_tick)
            .map(|i| client.new_job(queue, &serde_json::json!({ "t": t, "i": n + i })))
            .collect::<backlog::Result<Vec<_>>>()?;
        match client.enqueue_many(jobs).await {
            Ok(_) => {
                counters.enqueued.fetch_add(per_tick, Ordering::Relaxed);
                n += per_tick;
            }
            Err(e) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("soak: enqueue failed: {e}");
            }
        }
        if Instant::now() >= next_look && Instant::now() + LOOK_EVERY / 2 < next_sample {
            sampler.look().await?;
            next_look += LOOK_EVERY;
        }
        if Instant::now() >= next_sample {
            next_look = Instant::now() + LOOK_EVERY;
            let w = sampler.sample().await?;
            bar.set_message(format!(
                "soak: {:.0} s, rss {} MiB, p99 {:.1} ms",
                w.at_s,
                w.rss_bytes >> 20,
                w.latency_p99_ms.unwrap_or(f64::NAN)
            ));
            bar.inc(1);
            next_sample += window;
        }
    }
    shutdown.cancel();
    running.await??;
    drop(held);
    let settled: Vec<&Window> = sampler
        .windows
        .iter()
        .filter(|w| w.at_s > p.settle_secs + 1e-6)
        .collect();
    let trends = trends(&settled);
    Ok(SoakReport {
        flat: trends.iter().all(|t| t.flat),
        trends,
        jobs_enqueued: counters.enqueued.load(Ordering::Relaxed),
        jobs_completed: counters.completed.load(Ordering::Relaxed),
        windows: sampler.windows,
        params: p.clone(),
    })
}

/// Each measure's first third against its last third of the settled windows. Flat means the
/// last exceeds the first by no more than the measure's noise: a fifth (and 8 MiB) for memory,
/// two connections, a quarter (and 1 MiB) for bytes on disk, and twice (and 5 ms) for p99.
fn trends(settled: &[&Window]) -> Vec<Trend> {
    let third = (settled.len() / 3).max(1);
    let (head, tail) = (
        &settled[..third.min(settled.len())],
        &settled[settled.len().saturating_sub(third)..],
    );
    let m = |ws: &[&Window], f: &dyn Fn(&Window) -> Option<f64>| {
        median(&ws.iter().filter_map(|w| f(w)).collect::<Vec<_>>())
    };
    let trend = |measure, f: &dyn Fn(&Window) -> Option<f64>, allowed: &dyn Fn(f64) -> f64| {
        let (first, last) = (m(head, f), m(tail, f));
        let allowed = allowed(first);
        Trend {
            measure,
            first,
            last,
            allowed,
            // A measure with no samples (NaN) has nothing growing.
            flat: last.partial_cmp(&(first + allowed)) != Some(std::cmp::Ordering::Greater),
        }
    };
    const MIB: f64 = 1024.0 * 1024.0;
    vec![
        trend("rss_bytes", &|w| Some(w.rss_bytes as f64), &|f| {
            (f * 0.2).max(8.0 * MIB)
        }),
        trend(
            "pool_connections",
            &|w| Some(f64::from(w.pool_connections)),
            &|_| 2.0,
        ),
        trend("sockets", &|w| Some(w.sockets as f64), &|_| 2.0),
        trend("table_bytes", &|w| Some(w.sizes.table_bytes as f64), &|f| {
            (f * 0.25).max(MIB)
        }),
        trend("index_bytes", &|w| Some(w.sizes.index_bytes as f64), &|f| {
            (f * 0.25).max(MIB)
        }),
        trend("latency_p99_ms", &|w| w.latency_p99_ms, &|f| f.max(5.0)),
        trend("waiting", &|w| Some(w.waiting as f64), &|f| f.max(1000.0)),
    ]
}

/// The overload run.
pub async fn overload(
    client: &Arc<Client>,
    base: &Baseline,
    queue: &str,
    p: &OverloadParams,
    bar: &ProgressBar,
) -> anyhow::Result<OverloadReport> {
    let mut s = QueueSettings::defaults(QueueName::new(queue)?);
    s.retention = Retention::Delete;
    client.queue_configure(&s).await?;
    base.analyze().await?;
    let counters = Arc::new(Counters::default());
    let worker = counting_worker(client, queue, p.concurrency, &counters, None)?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (w, s) = (worker.clone(), shutdown.clone());
        async move { w.run(s).await }
    });
    // The worker's claim loops poll the empty table: their plans are made now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    phase(bar, "overload: jobs completed", p.jobs);
    let mut sampler = Sampler::new(client, base, counters.clone());
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(std::collections::BTreeMap::<String, u64>::new()));
    let producers: Vec<_> = (0..p.producers)
        .map(|_| {
            let (client, next, counters, errors) = (
                client.clone(),
                next.clone(),
                counters.clone(),
                errors.clone(),
            );
            let (queue, total, batch) = (queue.to_owned(), p.jobs, p.batch);
            tokio::spawn(async move {
                loop {
                    let from = next.fetch_add(batch, Ordering::Relaxed);
                    if from >= total {
                        return Ok::<_, anyhow::Error>(());
                    }
                    let to = (from + batch).min(total);
                    let t = backlog::Clock::now(&backlog::SystemClock);
                    // A unique key per job: a batch whose outcome is unknown (a lost
                    // connection) is sent again without enqueueing any of it twice.
                    let jobs = (from..to)
                        .map(|i| {
                            let mut job =
                                client.new_job(&queue, &serde_json::json!({ "t": t, "i": i }))?;
                            job.unique_key = Some(backlog::UniqueKey::new(format!("o{i}"))?);
                            Ok(job)
                        })
                        .collect::<anyhow::Result<Vec<_>>>()?;
                    loop {
                        match client.enqueue_many(jobs.clone()).await {
                            Ok(_) => break,
                            Err(e) => {
                                counters.errors.fetch_add(1, Ordering::Relaxed);
                                let kind = match &e {
                                    backlog::Error::Database { kind, .. } => kind.to_string(),
                                    other => other.to_string(),
                                };
                                *errors.lock().expect("lock").entry(kind).or_default() += 1;
                                if !e.is_transient() {
                                    return Err(e.into());
                                }
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    }
                    counters.enqueued.fetch_add(to - from, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Every producer done; the first failure wins.
    let all_produced = tokio::spawn(async move {
        for produced in futures::future::try_join_all(producers).await? {
            produced?;
        }
        Ok::<_, anyhow::Error>(())
    });
    let window = Duration::from_secs_f64(p.window_secs);
    let mut enqueue_secs = None;
    loop {
        tokio::time::sleep(window).await;
        let w = sampler.sample().await?;
        bar.set_position(counters.completed.load(Ordering::Relaxed));
        bar.set_message(format!(
            "overload: rss {} MiB, {} waiting",
            w.rss_bytes >> 20,
            w.waiting
        ));
        if enqueue_secs.is_none() && all_produced.is_finished() {
            enqueue_secs = Some(sampler.started.elapsed().as_secs_f64());
        }
        let done = counters.completed.load(Ordering::Relaxed);
        if enqueue_secs.is_some() && done >= counters.enqueued.load(Ordering::Relaxed) {
            break;
        }
    }
    all_produced.await??;
    let total_secs = sampler.started.elapsed().as_secs_f64();
    shutdown.cancel();
    running.await??;
    let enqueue_secs = enqueue_secs.expect("set before the loop ends");
    let (acknowledged, completed) = (
        counters.enqueued.load(Ordering::Relaxed),
        counters.completed.load(Ordering::Relaxed),
    );
    let ws = &sampler.windows;
    Ok(OverloadReport {
        enqueue_secs,
        enqueue_per_s: acknowledged as f64 / enqueue_secs,
        total_secs,
        drain_per_s: completed as f64 / total_secs,
        acknowledged,
        completed,
        errors: errors.lock().expect("lock").clone().into_iter().collect(),
        pool_connections_max: ws.iter().map(|w| w.pool_connections).max().unwrap_or(0),
        rss_first_bytes: ws.first().map_or(0, |w| w.rss_bytes),
        rss_max_bytes: ws.iter().map(|w| w.rss_bytes).max().unwrap_or(0),
        waiting_max: ws.iter().map(|w| w.waiting).max().unwrap_or(0),
        windows: sampler.windows,
        params: p.clone(),
    })
}

fn mib(b: impl Into<f64>) -> f64 {
    b.into() / (1024.0 * 1024.0)
}

fn window_rows(ws: &[Window]) -> String {
    let mut s = format!(
        "{:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>5} {:>7} {:>6} {:>9} {:>10} {:>10} {:>9} {:>10} {:>5}\n",
        "at s",
        "enqueued",
        "done",
        "waiting",
        "p50 ms",
        "p99 ms",
        "RSS MiB",
        "pool",
        "sockets",
        "server",
        "rows",
        "table MiB",
        "index MiB",
        "kept MiB",
        "garbage",
        "errs"
    );
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
    for w in ws {
        s.push_str(&format!(
            "{:>7.0} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7.1} {:>5} {:>7} {:>6} {:>9} {:>10.1} {:>10.1} {:>9.1} {:>10} {:>5}\n",
            w.at_s,
            w.enqueued,
            w.completed,
            w.waiting,
            ms(w.latency_p50_ms),
            ms(w.latency_p99_ms),
            mib(w.rss_bytes as f64),
            w.pool_connections,
            w.sockets,
            w.server_connections,
            w.sizes.rows,
            mib(w.sizes.table_bytes as f64),
            mib(w.sizes.index_bytes as f64),
            mib(w.sizes.kept_bytes as f64),
            w.garbage,
            w.errors
        ));
    }
    s
}

/// The soak's report for people.
pub fn soak_human(r: &SoakReport) -> String {
    let p = &r.params;
    let mut s = format!(
        "backlog bench --soak on {}: {:.0} s at {} jobs/s, windows of {:.0} s, completed jobs \
         kept {:.0} s then pruned{}\n\n",
        p.backend,
        p.secs,
        p.rate,
        p.window_secs,
        p.keep_completed_secs,
        match (p.hold_kind, p.hold_elsewhere) {
            (None, _) => "",
            (Some(HoldKind::Snapshot), false) => {
                ", another session holding a snapshot open throughout"
            }
            (Some(HoldKind::Snapshot), true) => {
                ", a session on a replica holding a snapshot open throughout"
            }
            (Some(HoldKind::Write), _) => {
                ", another session idle in transaction after a write throughout"
            }
        }
    );
    s.push_str(&window_rows(&r.windows));
    s.push_str(&format!(
        "\n{} jobs enqueued, {} completed. From {:.0} s on (first third against last third of \
         the windows):\n",
        r.jobs_enqueued, r.jobs_completed, p.settle_secs
    ));
    for t in &r.trends {
        s.push_str(&format!(
            "{:<20} {:>14.1} -> {:>14.1} (allowed +{:.1}) {}\n",
            t.measure,
            t.first,
            t.last,
            t.allowed,
            if t.flat { "flat" } else { "GROWS" }
        ));
    }
    s.push_str(if r.flat {
        "verdict: flat\n"
    } else {
        "verdict: not flat\n"
    });
    s
}

/// The overload run's report for people.
pub fn overload_human(r: &OverloadReport) -> String {
    let p = &r.params;
    let mut s = format!(
        "backlog bench --overload on {}: {} jobs from {} producers in batches of {} over a pool \
         of {} connections, a worker running {} at once\n\n",
        p.backend, p.jobs, p.producers, p.batch, p.pool_connections, p.concurrency
    );
    s.push_str(&window_rows(&r.windows));
    s.push_str(&format!(
        "\nall {} acknowledged in {:.1} s ({:.0}/s); all completed after {:.1} s ({:.0}/s); \
         completed {}\nmost waiting {}; pool at most {} connections; RSS {:.1} MiB after the \
         first window, at most {:.1} MiB\nfailed calls (retried): {}\n",
        r.acknowledged,
        r.enqueue_secs,
        r.enqueue_per_s,
        r.total_secs,
        r.drain_per_s,
        r.completed,
        r.waiting_max,
        r.pool_connections_max,
        mib(r.rss_first_bytes as f64),
        mib(r.rss_max_bytes as f64),
        if r.errors.is_empty() {
            "none".to_owned()
        } else {
            r.errors
                .iter()
                .map(|(k, n)| format!("{n} × {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(rss: u64, p99: f64) -> Window {
        Window {
            at_s: 0.0,
            enqueued: 0,
            completed: 0,
            waiting: 0,
            latency_p50_ms: Some(p99 / 2.0),
            latency_p99_ms: Some(p99),
            rss_bytes: rss,
            pool_connections: 4,
            sockets: 5,
            server_connections: 5,
            sizes: Sizes {
                rows: 0,
                table_bytes: 1 << 20,
                index_bytes: 1 << 20,
                kept_bytes: 0,
            },
            garbage: 0,
            errors: 0,
        }
    }

    #[test]
    fn a_steady_run_is_flat_and_a_leak_is_not() {
        const MIB: u64 = 1 << 20;
        let steady: Vec<Window> = (0..9).map(|i| w(50 * MIB + i % 2, 3.0)).collect();
        let t = trends(&steady.iter().collect::<Vec<_>>());
        assert!(t.iter().all(|t| t.flat), "{t:?}");
        let leak: Vec<Window> = (0..9).map(|i| w((50 + 10 * i) * MIB, 3.0)).collect();
        let t = trends(&leak.iter().collect::<Vec<_>>());
        assert!(!t[0].flat && t[1..].iter().all(|t| t.flat), "{t:?}");
        let slower: Vec<Window> = (0..9).map(|i| w(50 * MIB, 3.0 + 4.0 * i as f64)).collect();
        let t = trends(&slower.iter().collect::<Vec<_>>());
        assert!(
            !t.iter()
                .find(|t| t.measure == "latency_p99_ms")
                .unwrap()
                .flat
        );
    }
}
