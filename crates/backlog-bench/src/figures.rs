//! The default run: enqueue rates, end-to-end throughput through the real worker runtime, and
//! enqueue-to-start latency, each next to the database's own ceiling for the same work written
//! as bare SQL ([`crate::baseline`]), measured in the same run so the ratios hold on a noisy
//! machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backlog::{
    CancellationToken, Client, DrainMode, JobContext, Outcome, QueueName, QueueSettings, Retention,
    Worker,
};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::args::Phase;
use crate::baseline::{BareForm, Baseline, retry_deadlocks};
use crate::params::Params;
use crate::util::{CpuClock, median, noop_worker, paired, per_job, phase};
use crate::{http, s2};

/// The figures (`--json` prints this).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub enqueue_single_per_s: f64,
    pub enqueue_single_baseline_per_s: f64,
    pub enqueue_single_ratio: f64,
    pub enqueue_batch_per_s: f64,
    pub enqueue_batch_baseline_per_s: f64,
    pub enqueue_batch_ratio: f64,
    /// CPU this process spent per job in `Client::enqueue_many` (building the jobs included, as
    /// a caller does): one producer waits for each statement, so this adds to its time.
    pub enqueue_batch_client_cpu_us_per_job: f64,
    /// The same for the bare multi-row INSERTs (building the payload strings included).
    pub enqueue_batch_baseline_client_cpu_us_per_job: f64,
    pub e2e_jobs_per_s: f64,
    /// Bare SQL in the fewest statements: each batch is deleted in the statement (one
    /// transaction on SQLite and MySQL) that claims the next, as the runtime does.
    pub baseline_jobs_per_s: f64,
    pub e2e_ratio: f64,
    /// Bare SQL with a claim statement and a delete statement per batch.
    pub baseline_two_statements_jobs_per_s: f64,
    pub e2e_two_statements_ratio: f64,
    /// CPU this process spent per job in the runtime's drain (every thread, the progress display
    /// too): on a machine the database shares, the client's CPU is taken from the database.
    pub e2e_client_cpu_us_per_job: f64,
    /// The same in the one-statement bare drain.
    pub baseline_client_cpu_us_per_job: f64,
    /// Bytes the database wrote to its write-ahead log per job in the runtime's drain
    /// (PostgreSQL WAL, MariaDB/MySQL redo; the server's whole log, so nothing else should run on
    /// it meanwhile). Not measured on SQLite (null).
    pub e2e_log_bytes_per_job: f64,
    /// The same in the one-statement bare drain.
    pub baseline_log_bytes_per_job: f64,
    /// The loop count of each round's fastest one-statement bare drain (`params.fold_loops`
    /// were tried): the baseline the drain ratio is taken against.
    pub baseline_loops: Vec<u64>,
    /// And its form: `statement` (each batch deleted by the statement that claims the next,
    /// under a lease) or `transaction` (a batch locked and deleted in one transaction).
    pub baseline_forms: Vec<BareForm>,
    pub e2e_steady_jobs_per_s: f64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub s2_mean_ms: f64,
    pub s2_p99_ms: f64,
    pub s2_wall_s: f64,
    /// Batched enqueue through `POST /api/v1/jobs/batch` (4 clients).
    pub http_enqueue_batch_per_s: f64,
    /// The same jobs through `Client::enqueue_many` (4 tasks).
    pub http_enqueue_batch_library_per_s: f64,
    pub http_enqueue_batch_ratio: f64,
    /// Claim and complete through the API's worker protocol (4 loops).
    pub http_drain_per_s: f64,
    /// The same through `Client::claim` and `complete_refs` (4 loops).
    pub http_drain_library_per_s: f64,
    pub http_drain_ratio: f64,
    /// `GET /api/v1/jobs/{id}` while the runtime drains a queue.
    pub http_show_p50_ms: f64,
    pub http_show_p99_ms: f64,
    pub params: Params,
}

pub(crate) async fn measure(
    url: &str,
    client: &Arc<Client>,
    base: &Baseline,
    prefix: &str,
    p: &Params,
    bar: &ProgressBar,
) -> anyhow::Result<Report> {
    let q = |name: &str| format!("{prefix}{name}");
    for name in [
        "single",
        "single_base",
        "drain",
        "drain_base",
        "drain_fold",
        "steady",
        "latency",
        "http_api",
        "http_lib",
        "http_show",
        "http_probe",
    ] {
        let mut s = QueueSettings::defaults(QueueName::new(q(name))?);
        s.retention = Retention::Delete; // the baseline completes by DELETE too
        s.shards = p.shards;
        client.queue_configure(&s).await?;
    }
    // S2 keeps its rows, to read when each job was claimed and completed.
    let mut s = QueueSettings::defaults(QueueName::new(q("s2"))?);
    s.retention = Retention::Keep;
    client.queue_configure(&s).await?;
    // Each round runs both sides, so drift on a shared machine (autovacuum, other processes) hits
    // both alike; a rate is the median over the rounds, a ratio the median of the rounds' ratios.
    let on = |phase: Phase| p.phases.contains(&phase);
    let mut r = Rounds::default();
    for round in 1..=p.rounds {
        let tag = format!("round {round}/{}", p.rounds);
        base.vacuum().await?;
        // Odd rounds run the bare SQL first, even rounds backlog: a fixed order would give one
        // side the same spot every time (after the other's WAL, dead rows, checkpoint).
        let backlog_first = round % 2 == 0;
        if on(Phase::Enqueue) {
            if backlog_first {
                r.single
                    .push(single_backlog(client, &q("single"), p, bar, &tag).await?);
            }
            r.single_base
                .push(single_bare(base, &q("single_base"), p, bar, &tag).await?);
            if !backlog_first {
                r.single
                    .push(single_backlog(client, &q("single"), p, bar, &tag).await?);
            }
            base.clean(&q("single")).await?;
        }
        if on(Phase::Enqueue) || on(Phase::Drain) {
            // The batched enqueue queues the drain's jobs; its rates count only with enqueue.
            let timed = |rate: anyhow::Result<f64>, cpu: CpuClock| {
                rate.map(|rate| (rate, cpu.us_per(p.batch_jobs)))
            };
            let (batch_base, batch) = if backlog_first {
                let cpu = CpuClock::start();
                let batch = timed(batch_backlog(client, &q("drain"), p, bar, &tag).await, cpu)?;
                let cpu = CpuClock::start();
                let base = timed(batch_bare(base, &q("drain_base"), p, bar, &tag).await, cpu)?;
                (base, batch)
            } else {
                let cpu = CpuClock::start();
                let base = timed(batch_bare(base, &q("drain_base"), p, bar, &tag).await, cpu)?;
                let cpu = CpuClock::start();
                let batch = timed(batch_backlog(client, &q("drain"), p, bar, &tag).await, cpu)?;
                (base, batch)
            };
            if on(Phase::Enqueue) {
                r.batch_base.push(batch_base.0);
                r.batch.push(batch.0);
                r.batch_base_cpu.push(batch_base.1);
                r.batch_cpu.push(batch.1);
            }
        }
        if on(Phase::Drain) {
            // Each drain starts from a checkpoint, so none pays for one the phase before set off.
            if backlog_first {
                base.checkpoint().await?;
                let (cpu, log) = (CpuClock::start(), base.log_bytes().await?);
                r.drain
                    .push(drain_backlog(client, &q("drain"), p, bar, &tag).await?);
                r.drain_cpu.push(cpu.us_per(p.batch_jobs));
                r.drain_log
                    .push(per_job(log, base.log_bytes().await?, p.batch_jobs));
            }
            base.checkpoint().await?;
            r.drain_base
                .push(drain_bare(client, base, &q("drain_base"), p, bar, &tag).await?);
            // The one-statement form and the transaction form (lock, delete, commit: where
            // the database has one) with each loop count; the round keeps the fastest.
            let mut best: Option<(f64, f64, f64, u64, BareForm)> = None;
            for form in base.forms() {
                for &loops in &p.fold_loops {
                    fill_bare(base, &q("drain_fold"), p).await?;
                    base.checkpoint().await?;
                    let (cpu, log) = (CpuClock::start(), base.log_bytes().await?);
                    let (queue, fold) = (&q("drain_fold"), Fold { loops, form });
                    let rate = drain_folded(client, base, queue, p, fold, bar, &tag).await?;
                    let cpu = cpu.us_per(p.batch_jobs);
                    let log = per_job(log, base.log_bytes().await?, p.batch_jobs);
                    if best.is_none_or(|b| rate > b.0) {
                        best = Some((rate, cpu, log, loops, form));
                    }
                }
            }
            let (rate, cpu, log, loops, form) = best.expect("at least one loop count");
            r.drain_fold.push(rate);
            r.drain_fold_cpu.push(cpu);
            r.drain_fold_log.push(log);
            r.drain_fold_loops.push(loops);
            r.drain_fold_forms.push(form);
            if !backlog_first {
                base.checkpoint().await?;
                let (cpu, log) = (CpuClock::start(), base.log_bytes().await?);
                r.drain
                    .push(drain_backlog(client, &q("drain"), p, bar, &tag).await?);
                r.drain_cpu.push(cpu.us_per(p.batch_jobs));
                r.drain_log
                    .push(per_job(log, base.log_bytes().await?, p.batch_jobs));
            }
        } else {
            base.clean(&q("drain")).await?; // drain, drain_base and drain_fold: a prefix
        }
    }
    let (single, single_base) = (median(&r.single), median(&r.single_base));
    let (batch, batch_base) = (median(&r.batch), median(&r.batch_base));
    let (drain, drain_base) = (median(&r.drain), median(&r.drain_base));
    let drain_fold = median(&r.drain_fold);

    // (b) a steady producer while the runtime works.
    let steady = match on(Phase::Steady) {
        true => steady(client, &q("steady"), p, bar).await?,
        false => f64::NAN,
    };

    // (c) enqueue-to-start latency at a modest rate, from a producer with its own connections
    // (as another process would be): wake-ups come through the database.
    let (p50, p99) = match on(Phase::Latency) {
        true => latency(url, client, &q("latency"), p, bar).await?,
        false => (f64::NAN, f64::NAN),
    };

    let s2 = match on(Phase::S2) {
        true => {
            s2::replay(
                client,
                base,
                &q("s2"),
                (
                    p.s2_jobs,
                    p.s2_concurrency,
                    Duration::from_millis(p.s2_sleep_ms),
                ),
                bar,
            )
            .await?
        }
        false => s2::S2 {
            mean_ms: f64::NAN,
            p99_ms: f64::NAN,
            wall_s: f64::NAN,
        },
    };

    let http = match on(Phase::Http) {
        true => Some(http::measure(client, &q, p, bar).await?),
        false => None,
    };
    let h = |f: fn(&http::Http) -> f64| http.as_ref().map_or(f64::NAN, f);

    Ok(Report {
        http_enqueue_batch_per_s: h(|h| median(&h.enqueue)),
        http_enqueue_batch_library_per_s: h(|h| median(&h.enqueue_lib)),
        http_enqueue_batch_ratio: h(http::Http::enqueue_ratio),
        http_drain_per_s: h(|h| median(&h.drain)),
        http_drain_library_per_s: h(|h| median(&h.drain_lib)),
        http_drain_ratio: h(http::Http::drain_ratio),
        http_show_p50_ms: h(|h| h.show_p50_ms),
        http_show_p99_ms: h(|h| h.show_p99_ms),
        enqueue_single_per_s: single,
        enqueue_single_baseline_per_s: single_base,
        enqueue_single_ratio: paired(&r.single, &r.single_base),
        enqueue_batch_per_s: batch,
        enqueue_batch_baseline_per_s: batch_base,
        enqueue_batch_ratio: paired(&r.batch, &r.batch_base),
        e2e_jobs_per_s: drain,
        baseline_jobs_per_s: drain_fold,
        e2e_ratio: paired(&r.drain, &r.drain_fold),
        baseline_two_statements_jobs_per_s: drain_base,
        e2e_two_statements_ratio: paired(&r.drain, &r.drain_base),
        enqueue_batch_client_cpu_us_per_job: median(&r.batch_cpu),
        enqueue_batch_baseline_client_cpu_us_per_job: median(&r.batch_base_cpu),
        e2e_client_cpu_us_per_job: median(&r.drain_cpu),
        baseline_client_cpu_us_per_job: median(&r.drain_fold_cpu),
        e2e_log_bytes_per_job: median(&r.drain_log),
        baseline_log_bytes_per_job: median(&r.drain_fold_log),
        baseline_loops: r.drain_fold_loops.clone(),
        baseline_forms: r.drain_fold_forms.clone(),
        e2e_steady_jobs_per_s: steady,
        latency_p50_ms: p50,
        latency_p99_ms: p99,
        s2_mean_ms: s2.mean_ms,
        s2_p99_ms: s2.p99_ms,
        s2_wall_s: s2.wall_s,
        params: p.clone(),
    })
}

#[derive(Default)]
struct Rounds {
    single: Vec<f64>,
    single_base: Vec<f64>,
    batch: Vec<f64>,
    batch_base: Vec<f64>,
    drain: Vec<f64>,
    drain_base: Vec<f64>,
    drain_fold: Vec<f64>,
    drain_cpu: Vec<f64>,
    drain_fold_cpu: Vec<f64>,
    drain_log: Vec<f64>,
    drain_fold_log: Vec<f64>,
    /// The loop count of each round's fastest one-statement bare drain.
    drain_fold_loops: Vec<u64>,
    /// And its form.
    drain_fold_forms: Vec<BareForm>,
    batch_cpu: Vec<f64>,
    batch_base_cpu: Vec<f64>,
}

fn payload(i: u64) -> String {
    format!("{{\"i\":{i}}}")
}

/// (a) single-row INSERTs, `producers` at once.
async fn single_bare(
    base: &Baseline,
    queue: &str,
    p: &Params,
    bar: &ProgressBar,
    tag: &str,
) -> anyhow::Result<f64> {
    phase(
        bar,
        &format!("{tag}: enqueue single (bare SQL)"),
        p.single_jobs,
    );
    let per = p.single_jobs / p.producers;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..p.producers {
        let (base, queue, bar) = (base.clone(), queue.to_owned(), bar.clone());
        tasks.spawn(async move {
            for i in 0..per {
                base.insert_one(&queue, &payload(t * per + i)).await?;
                bar.inc(1);
            }
            Ok::<_, backlog::sqlx::Error>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok((per * p.producers) as f64 / started.elapsed().as_secs_f64())
}

/// (a) `Client::enqueue`, `producers` at once.
async fn single_backlog(
    client: &Arc<Client>,
    queue: &str,
    p: &Params,
    bar: &ProgressBar,
    tag: &str,
) -> anyhow::Result<f64> {
    phase(
        bar,
        &format!("{tag}: enqueue single (backlog)"),
        p.single_jobs,
    );
    let per = p.single_jobs / p.producers;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..p.producers {
        let (client, queue, bar) = (client.clone(), queue.to_owned(), bar.clone());
        tasks.spawn(async move {
            for i in 0..per {
                let job = client.new_job(&queue, &serde_json::json!({ "i": t * per + i }))?;
                client.enqueue(job).await?;
                bar.inc(1);
            }
            Ok::<_, backlog::Error>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok((per * p.producers) as f64 / started.elapsed().as_secs_f64())
}

/// (a) multi-row INSERTs of `batch_size` rows, one after another.
async fn batch_bare(
    base: &Baseline,
    queue: &str,
    p: &Params,
    bar: &ProgressBar,
    tag: &str,
) -> anyhow::Result<f64> {
    phase(
        bar,
        &format!("{tag}: enqueue batched (bare SQL)"),
        p.batch_jobs,
    );
    let started = Instant::now();
    let mut i = 0;
    while i < p.batch_jobs {
        let k = p.batch_size.min(p.batch_jobs - i);
        let rows: Vec<String> = (i..i + k).map(payload).collect();
        base.insert_many(queue, &rows).await?;
        i += k;
        bar.inc(k);
    }
    Ok(p.batch_jobs as f64 / started.elapsed().as_secs_f64())
}

/// (a) `Client::enqueue_many` of `batch_size` jobs, one after another.
async fn batch_backlog(
    client: &Arc<Client>,
    queue: &str,
    p: &Params,
    bar: &ProgressBar,
    tag: &str,
) -> anyhow::Result<f64> {
    phase(
        bar,
        &format!("{tag}: enqueue batched (backlog)"),
        p.batch_jobs,
    );
    let started = Instant::now();
    let mut i = 0;
    while i < p.batch_jobs {
        let k = p.batch_size.min(p.batch_jobs - i);
        let jobs = (i..i + k)
            .map(|n| client.new_job(queue, &serde_json::json!({ "i": n })))
            .collect::<backlog::Result<Vec<_>>>()?;
        client.enqueue_many(jobs).await?;
        i += k;
        bar.inc(k);
    }
    Ok(p.batch_jobs as f64 / started.elapsed().as_secs_f64())
}

/// (b) bare claim-and-complete loops over the pre-queued jobs.
async fn drain_bare(
    client: &Arc<Client>,
    base: &Baseline,
    queue: &str,
    p: &Params,
    bar: &ProgressBar,
    tag: &str,
) -> anyhow::Result<f64> {
    let limit = (p.concurrency / p.baseline_loops).max(1) as i64;
    let label = format!("{tag}: drain (bare SQL)");
    bare_loops(p, p.baseline_loops, bar, &label, || {
        let (base, client, queue, bar) =
            (base.clone(), client.clone(), queue.to_owned(), bar.clone());
        async move {
            loop {
                let token = rand::random::<i64>();
                let jobs =
                    retry_deadlocks(|| base.claim_complete(&queue, limit, client.now(), token))
                        .await?;
                if jobs.is_empty() {
                    return Ok(());
                }
                bar.inc(jobs.len() as u64);
            }
        }
    })
    .await
}

/// Queues `batch_jobs` jobs by bare multi-row INSERTs, untimed.
async fn fill_bare(base: &Baseline, queue: &str, p: &Params) -> anyhow::Result<()> {
    let mut i = 0;
    while i < p.batch_jobs {
        let k = p.batch_size.min(p.batch_jobs - i);
        base.insert_many(queue, &(i..i + k).map(payload).collect::<Vec<_>>())
            .await?;
        i += k;
    }
    Ok(())
}

/// A bare drain form and how many loops run it.
#[derive(Debug, Clone, Copy)]
struct Fold {
    loops: u64,
    form: BareForm,
}

/// (b) bare loops that delete each batch in the statement (or transaction) that claims the
/// next, as the runtime does under a lease (`BareForm::Statement`), or that lock a batch and
/// delete it in one transaction, as the runtime does in transaction claim mode
/// (`BareForm::Transaction`): the ceilings of the runtime's two paths.
async fn drain_folded(
    client: &Arc<Client>,
    base: &Baseline,
    queue: &str,
    p: &Params,
    fold: Fold,
    bar: &ProgressBar,
    tag: &str,
) -> anyhow::Result<f64> {
    let Fold { loops, form } = fold;
    let limit = (p.concurrency / loops).max(1) as i64;
    let label = format!("{tag}: drain (bare SQL, {form}, {loops} loops)");
    bare_loops(p, loops, bar, &label, || {
        let (base, client, queue, bar) =
            (base.clone(), client.clone(), queue.to_owned(), bar.clone());
        async move {
            let (mut prev, mut prev_token) = (vec![], 0);
            loop {
                let token = rand::random::<i64>();
                let jobs = match form {
                    BareForm::Statement => {
                        retry_deadlocks(|| {
                            base.complete_claim_folded(
                                &queue,
                                limit,
                                client.now(),
                                token,
                                &prev,
                                prev_token,
                            )
                        })
                        .await?
                    }
                    BareForm::Transaction => {
                        retry_deadlocks(|| base.claim_delete_tx(&queue, limit, client.now()))
                            .await?
                            .unwrap_or_default()
                    }
                };
                if jobs.is_empty() {
                    return Ok(());
                }
                bar.inc(jobs.len() as u64);
                if form == BareForm::Statement {
                    prev = jobs.iter().map(|j| j.0).collect();
                    prev_token = token;
                }
            }
        }
    })
    .await
}

/// Runs `loops` copies of a bare drain loop at once (each from `one_loop()`) until all of them
/// find nothing left; returns the drain rate.
async fn bare_loops<F, Fut>(
    p: &Params,
    loops: u64,
    bar: &ProgressBar,
    label: &str,
    one_loop: F,
) -> anyhow::Result<f64>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), backlog::sqlx::Error>> + Send + 'static,
{
    phase(bar, label, p.batch_jobs);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..loops {
        tasks.spawn(one_loop());
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(p.batch_jobs as f64 / started.elapsed().as_secs_f64())
}

/// (b) the worker runtime draining the pre-queued jobs with a no-op handler.
async fn drain_backlog(
    client: &Arc<Client>,
    queue: &str,
    p: &Params,
    bar: &ProgressBar,
    tag: &str,
) -> anyhow::Result<f64> {
    phase(
        bar,
        &format!("{tag}: drain (backlog runtime)"),
        p.batch_jobs,
    );
    let done = Arc::new(AtomicU64::new(0));
    let worker = noop_worker(client, queue, p.concurrency, done, bar)?
        .configure(|c| {
            c.drain = Some(DrainMode::All);
            c.fetchers = p.fetchers.map(|n| n as usize);
            c.claim_batch = p.claim_batch.map(|n| n as usize);
            c.claim_in_transaction = !p.lease_claims;
        })
        .build()?;
    let started = Instant::now();
    let report = worker.run(CancellationToken::new()).await?;
    let rate = report.completed as f64 / started.elapsed().as_secs_f64();
    if report.completed != p.batch_jobs {
        anyhow::bail!(
            "the runtime completed {} of {} jobs",
            report.completed,
            p.batch_jobs
        );
    }
    Ok(rate)
}

async fn steady(
    client: &Arc<Client>,
    queue: &str,
    p: &Params,
    bar: &ProgressBar,
) -> anyhow::Result<f64> {
    phase(bar, "steady producer (backlog runtime)", 0);
    let done = Arc::new(AtomicU64::new(0));
    let worker = noop_worker(client, queue, p.concurrency, done.clone(), bar)?.build()?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (w, s) = (worker.clone(), shutdown.clone());
        async move { w.run(s).await }
    });
    let window = Duration::from_secs_f64(p.steady_secs);
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < window {
        let jobs = (0..100)
            .map(|i| client.new_job(queue, &serde_json::json!({ "i": n + i })))
            .collect::<backlog::Result<Vec<_>>>()?;
        client.enqueue_many(jobs).await?;
        n += 100;
    }
    let worked = done.load(Ordering::Relaxed);
    let elapsed = started.elapsed();
    shutdown.cancel();
    running.await??;
    Ok(worked as f64 / elapsed.as_secs_f64())
}

async fn latency(
    url: &str,
    client: &Arc<Client>,
    queue: &str,
    p: &Params,
    bar: &ProgressBar,
) -> anyhow::Result<(f64, f64)> {
    phase(bar, "enqueue-to-start latency", p.latency_jobs);
    let samples = Arc::new(std::sync::Mutex::new(Vec::with_capacity(
        p.latency_jobs as usize,
    )));
    let (s, b) = (samples.clone(), bar.clone());
    let worker = Worker::builder(client.clone())
        .queue(queue, 10)
        .fallback_handler(move |ctx: JobContext| {
            let now = backlog::Clock::now(&backlog::SystemClock);
            let sent: serde_json::Value =
                serde_json::from_str(&ctx.job().payload).unwrap_or_default();
            if let Some(t) = sent["t"].as_i64() {
                s.lock().expect("lock").push(now - t);
            }
            b.inc(1);
            async { Ok(Outcome::Complete) }
        })
        .configure(|c| c.maintenance = None)
        .build()?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let (w, s) = (worker.clone(), shutdown.clone());
        async move { w.run(s).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await; // let the worker go idle
    let producer = Client::connect(url).await?;
    let every = Duration::from_secs_f64(1.0 / p.latency_rate_per_s.max(1) as f64);
    let mut tick = tokio::time::interval(every);
    for _ in 0..p.latency_jobs {
        tick.tick().await;
        let t = backlog::Clock::now(&backlog::SystemClock);
        producer
            .enqueue(producer.new_job(queue, &serde_json::json!({ "t": t }))?)
            .await?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while (samples.lock().expect("lock").len() as u64) < p.latency_jobs {
        if Instant::now() > deadline {
            anyhow::bail!("latency jobs were not all worked within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    running.await??;
    producer.close().await;
    let mut v = samples.lock().expect("lock").clone();
    v.sort_unstable();
    let pct = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    Ok((pct(0.50), pct(0.99)))
}

pub(crate) fn human(r: &Report) -> String {
    let p = &r.params;
    let mut s = format!(
        "backlog bench on {}: {} single enqueues by {} producers, {} jobs in batches of {}, \
         concurrency {}; medians of {} rounds (a ratio: the median of each round's own)\n\n",
        p.backend, p.single_jobs, p.producers, p.batch_jobs, p.batch_size, p.concurrency, p.rounds
    );
    s.push_str(&format!(
        "{:<34} {:>12} {:>12} {:>7}\n",
        "", "backlog", "bare SQL", "ratio"
    ));
    // The ratio is the median of each round's own ratio, not the ratio of the two medians.
    let row = |s: &mut String, name: &str, ours: f64, base: f64, ratio: f64| {
        if ours.is_nan() {
            return; // a phase left out by --only
        }
        s.push_str(&format!(
            "{name:<34} {ours:>10.0}/s {base:>10.0}/s {:>6.0}%\n",
            100.0 * ratio
        ))
    };
    let cpu_row = |s: &mut String, name: &str, ours: f64, base: f64| {
        if !ours.is_nan() {
            s.push_str(&format!("{name:<34} {ours:>9.2} µs {base:>9.2} µs\n"));
        }
    };
    row(
        &mut s,
        "enqueue, single",
        r.enqueue_single_per_s,
        r.enqueue_single_baseline_per_s,
        r.enqueue_single_ratio,
    );
    row(
        &mut s,
        "enqueue, batched",
        r.enqueue_batch_per_s,
        r.enqueue_batch_baseline_per_s,
        r.enqueue_batch_ratio,
    );
    cpu_row(
        &mut s,
        "enqueue, batched, CPU per job",
        r.enqueue_batch_client_cpu_us_per_job,
        r.enqueue_batch_baseline_client_cpu_us_per_job,
    );
    row(
        &mut s,
        "drain (best bare form)",
        r.e2e_jobs_per_s,
        r.baseline_jobs_per_s,
        r.e2e_ratio,
    );
    if !r.baseline_loops.is_empty() {
        let loops: Vec<String> = (r.baseline_loops.iter().zip(&r.baseline_forms))
            .map(|(n, form)| format!("{n} {form}"))
            .collect();
        let tried: Vec<String> = r.params.fold_loops.iter().map(u64::to_string).collect();
        s.push_str(&format!(
            "{:<34} {:>22}  (of {} tried)\n",
            "drain, bare loops (best a round)",
            loops.join(", "),
            tried.join(", ")
        ));
    }
    row(
        &mut s,
        "drain, against two statements",
        r.e2e_jobs_per_s,
        r.baseline_two_statements_jobs_per_s,
        r.e2e_two_statements_ratio,
    );
    cpu_row(
        &mut s,
        "drain, this process's CPU per job",
        r.e2e_client_cpu_us_per_job,
        r.baseline_client_cpu_us_per_job,
    );
    if !r.e2e_log_bytes_per_job.is_nan() {
        s.push_str(&format!(
            "{:<34} {:>9.0} B  {:>9.0} B\n",
            "drain, WAL/redo bytes per job", r.e2e_log_bytes_per_job, r.baseline_log_bytes_per_job
        ));
    }
    if !r.e2e_steady_jobs_per_s.is_nan() {
        s.push_str(&format!(
            "{:<34} {:>10.0}/s\n",
            "steady producer, end to end", r.e2e_steady_jobs_per_s
        ));
    }
    if !r.latency_p50_ms.is_nan() {
        s.push_str(&format!(
            "{:<34} p50 {:.2} ms, p99 {:.2} ms ({} jobs at {}/s)\n",
            "enqueue to handler start",
            r.latency_p50_ms,
            r.latency_p99_ms,
            p.latency_jobs,
            p.latency_rate_per_s
        ));
    }
    if !r.s2_mean_ms.is_nan() {
        s.push_str(&format!(
            "{:<34} claim to completion mean {:.1} ms, p99 {:.1} ms \
         ({} jobs of {} ms, {} at once; {:.1} s in all)\n",
            "S2 replay",
            r.s2_mean_ms,
            r.s2_p99_ms,
            p.s2_jobs,
            p.s2_sleep_ms,
            p.s2_concurrency,
            r.s2_wall_s
        ));
    }
    if !r.http_enqueue_batch_per_s.is_nan() {
        s.push_str(&format!(
            "\n{:<34} {:>12} {:>12} {:>7}\n",
            "HTTP API (backlog serve)", "API", "library", "ratio"
        ));
        row(
            &mut s,
            "enqueue, batched (4 clients)",
            r.http_enqueue_batch_per_s,
            r.http_enqueue_batch_library_per_s,
            r.http_enqueue_batch_ratio,
        );
        row(
            &mut s,
            "claim and complete (4 loops)",
            r.http_drain_per_s,
            r.http_drain_library_per_s,
            r.http_drain_ratio,
        );
        s.push_str(&format!(
            "{:<34} p50 {:.2} ms, p99 {:.2} ms\n",
            "job show while a drain runs", r.http_show_p50_ms, r.http_show_p99_ms
        ));
    }
    s
}
