//! `backlog bench`: enqueue rates, end-to-end throughput through the real worker runtime, and
//! enqueue-to-start latency, each next to the database's own ceiling for the same work written
//! as bare SQL ([`baseline`]), measured in the same run so the ratios hold on a noisy machine.

mod baseline;
mod flow;
mod grow;
mod http;
pub(crate) mod procs;
mod s2;
mod soak;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backlog::{
    BackendConfig, CancellationToken, Client, DrainMode, JobContext, Outcome, QueueName,
    QueueSettings, Retention, Worker,
};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::cli::BenchArgs;
use baseline::{BareForm, Baseline};

/// A part of the benchmark, for `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Single and batched enqueue, each beside its bare INSERTs.
    Enqueue,
    /// The drain of pre-queued jobs, beside the bare claim-and-complete loops.
    Drain,
    /// A steady producer while the runtime works.
    Steady,
    /// Enqueue-to-start latency.
    Latency,
    /// The seed S2 replay.
    S2,
    /// The HTTP API (`backlog serve`) beside the library: batched enqueue, claim and complete,
    /// and job show while a drain runs.
    Http,
}

/// What one run measures, and with what.
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    pub backend: String,
    pub single_jobs: u64,
    pub producers: u64,
    pub batch_jobs: u64,
    pub batch_size: u64,
    pub concurrency: u64,
    /// Loops of the two-statement bare drain.
    pub baseline_loops: u64,
    /// The loop counts the one-statement bare drain is run with in each round; the fastest is
    /// the baseline (the best bare SQL at the same concurrency).
    pub fold_loops: Vec<u64>,
    /// The runtime's claim loops and claim size, when set (`--fetchers`, `--claim-batch`).
    pub fetchers: Option<u64>,
    pub claim_batch: Option<u64>,
    /// The runtime's drain claims under a lease only (`--lease-claims`).
    pub lease_claims: bool,
    pub shards: u16,
    pub steady_secs: f64,
    pub latency_jobs: u64,
    pub latency_rate_per_s: u64,
    pub rounds: u64,
    /// The phases run.
    pub phases: Vec<Phase>,
    pub s2_jobs: u64,
    pub s2_concurrency: u64,
    pub s2_sleep_ms: u64,
}

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

/// Runs the benchmark.
pub async fn run(url: &str, a: BenchArgs) -> anyhow::Result<ExitCode> {
    let p = params(url, &a);
    let config = BackendConfig {
        // --overload keeps the default pool: its producers are meant to outnumber it.
        max_connections: match a.overload {
            Some(_) => BackendConfig::default().max_connections,
            None => (p.producers as u32 + 4).max(16),
        },
        ..BackendConfig::default()
    };
    let client = Arc::new(Client::connect_with(url, &config).await?);
    client.migrate().await?;
    let prefix = format!("bench_{:08x}_", rand::random::<u32>());
    let base = Baseline::create(&client, &prefix, p.shards).await?;
    let bar = progress();
    let q = |name: &str| format!("{prefix}{name}");
    let json = |v: &dyn erased::Report| -> anyhow::Result<String> {
        Ok(if a.json { v.json()? } else { v.human() })
    };
    let result = if let Some(d) = a.soak {
        let sp = soak_params(&p, &a, d);
        soak::soak(&client, &base, &q("soak"), &sp, &bar)
            .await
            .and_then(|r| json(&r))
    } else if let Some(jobs) = a.overload {
        let op = soak::OverloadParams {
            backend: p.backend.clone(),
            jobs,
            producers: a.overload_producers,
            batch: a.batch.min(1000),
            pool_connections: config.max_connections,
            concurrency: p.concurrency,
            window_secs: a
                .soak_window
                .unwrap_or(Duration::from_secs(if a.quick { 1 } else { 10 }))
                .as_secs_f64(),
        };
        soak::overload(&client, &base, &q("overload"), &op, &bar)
            .await
            .and_then(|r| json(&r))
    } else if let Some(processes) = a.processes.clone() {
        let pp = procs::ProcsParams {
            backend: p.backend.clone(),
            jobs: a.jobs.unwrap_or(if a.quick { 2_000 } else { 100_000 }),
            processes,
            concurrency: a.process_concurrency,
            connections: a.process_connections,
            payload_bytes: a.payload_bytes,
            handler_ms: a.handler_ms,
            shards: p.shards,
        };
        procs::run(&client, &base, url, &q, &pp, &bar)
            .await
            .and_then(|r| json(&r))
    } else if a.flow {
        let fp = flow::FlowParams {
            backend: p.backend.clone(),
            drain_jobs: p.batch_jobs,
            groups: a.flow_groups.unwrap_or(if a.quick { 500 } else { 10_000 }),
            rounds: a.rounds.unwrap_or(if a.quick { 1 } else { 3 }),
            concurrency: p.concurrency,
            limit: a.flow_limit,
            limit_jobs: a.flow_limit_jobs.unwrap_or(if a.quick { 100 } else { 500 }),
            sleep_ms: p.s2_sleep_ms,
            worker_slots: p.s2_concurrency,
        };
        flow::run(&client, &base, url, &q, &fp, &bar)
            .await
            .and_then(|r| json(&r))
    } else if a.grow {
        let gp = grow_params(&p, &a);
        grow::run(&client, &base, &q, &gp, &bar)
            .await
            .and_then(|r| json(&r))
    } else {
        measure(url, &client, &base, &prefix, &p, &bar)
            .await
            .and_then(|r| {
                Ok(if a.json {
                    serde_json::to_string_pretty(&r)? + "\n"
                } else {
                    human(&r)
                })
            })
    };
    bar.finish_and_clear();
    let cleaned = base.clean(&prefix).await;
    let dropped = base.drop_table().await;
    let out = result?;
    cleaned?;
    dropped?;
    print!("{out}");
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

/// The loop counts the one-statement bare drain tries at `concurrency`: on SQLite one (its one
/// writer runs one claim at a time, so one claim of the whole concurrency is its fastest form);
/// elsewhere 2, and 4 and 8 as long as each loop still claims at least [`MIN_FOLD_CLAIM`] jobs.
/// The fastest is the baseline: at concurrency 500 on PostgreSQL four loops of 125 drained
/// 76,000–93,000 jobs/s where two of 250 drained 60,000–66,000 (BENCHMARKS.md).
fn fold_loops(backend: &str, concurrency: u64) -> Vec<u64> {
    if backend == "sqlite" {
        return vec![1];
    }
    let mut loops = vec![2];
    loops.extend(
        [4, 8]
            .into_iter()
            .filter(|n| concurrency / n >= MIN_FOLD_CLAIM),
    );
    loops
}

/// The smallest claim a loop of the one-statement bare drain is tried with (see [`fold_loops`]).
const MIN_FOLD_CLAIM: u64 = 50;

fn params(url: &str, a: &BenchArgs) -> Params {
    let backend = url.split(':').next().unwrap_or("").to_owned();
    let baseline_loops = a
        .baseline_loops
        .unwrap_or(if backend == "sqlite" { 1 } else { 2 });
    let fold_loops = match a.baseline_loops {
        Some(n) => vec![n],
        None => fold_loops(&backend, a.concurrency),
    };
    let q = a.quick;
    Params {
        backend,
        single_jobs: a.single_jobs.unwrap_or(if q { 800 } else { 10_000 }),
        producers: a.producers,
        batch_jobs: a.jobs.unwrap_or(if q { 5_000 } else { 100_000 }),
        batch_size: a.batch,
        concurrency: a.concurrency,
        baseline_loops,
        fold_loops,
        fetchers: a.fetchers,
        claim_batch: a.claim_batch,
        lease_claims: a.lease_claims,
        shards: a.shards,
        steady_secs: a
            .steady
            .unwrap_or(if q {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(10)
            })
            .as_secs_f64(),
        latency_jobs: a.latency_jobs.unwrap_or(if q { 100 } else { 2_000 }),
        latency_rate_per_s: a.latency_rate,
        rounds: a.rounds.unwrap_or(if q { 1 } else { 5 }),
        phases: a
            .only
            .clone()
            .unwrap_or_else(|| <Phase as clap::ValueEnum>::value_variants().to_vec()),
        s2_jobs: a.s2_jobs.unwrap_or(if q { 200 } else { 5_000 }),
        s2_concurrency: a.s2_concurrency.unwrap_or(if q { 100 } else { 500 }),
        s2_sleep_ms: a
            .s2_sleep
            .unwrap_or(Duration::from_millis(if q { 100 } else { 1000 }))
            .as_millis() as u64,
    }
}

fn soak_params(p: &Params, a: &BenchArgs, length: Duration) -> soak::SoakParams {
    let window = a.soak_window.unwrap_or(if a.quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(60)
    });
    let settle = a
        .soak_settle
        .unwrap_or((length / 6).min(Duration::from_secs(600)));
    soak::SoakParams {
        backend: p.backend.clone(),
        secs: length.as_secs_f64(),
        rate: a.soak_rate,
        window_secs: window.as_secs_f64(),
        settle_secs: settle.as_secs_f64(),
        keep_completed_secs: a.soak_keep.as_secs_f64(),
        concurrency: p.concurrency,
        hold_transaction: a.hold_transaction,
    }
}

/// The long runs' reports, printed for people or as JSON.
mod erased {
    pub trait Report {
        fn json(&self) -> anyhow::Result<String>;
        fn human(&self) -> String;
    }

    /// `Report` for a report type, printed for people by `$human`.
    macro_rules! report {
        ($report:ty, $human:path) => {
            impl Report for $report {
                fn json(&self) -> anyhow::Result<String> {
                    Ok(serde_json::to_string_pretty(self)? + "\n")
                }
                fn human(&self) -> String {
                    $human(self)
                }
            }
        };
    }

    report!(super::soak::SoakReport, super::soak::soak_human);
    report!(super::soak::OverloadReport, super::soak::overload_human);
    report!(super::flow::FlowReport, super::flow::human);
    report!(super::grow::GrowReport, super::grow::human);
    report!(super::procs::ProcsReport, super::procs::human);
}

fn grow_params(p: &Params, a: &BenchArgs) -> grow::GrowParams {
    let q = a.quick;
    grow::GrowParams {
        backend: p.backend.clone(),
        levels: a.grow_levels.clone().unwrap_or(if q {
            vec![2_000, 20_000]
        } else {
            vec![10_000, 1_000_000]
        }),
        drain_jobs: a.grow_drain.unwrap_or(if q { 1_000 } else { 10_000 }),
        rounds: a.rounds.unwrap_or(if q { 1 } else { 3 }),
        concurrency: p.concurrency,
        run_secs: a
            .grow_run
            .unwrap_or(Duration::from_secs(if q { 2 } else { 60 }))
            .as_secs_f64(),
        run_rate: a.grow_rate,
        keep_completed_ms: if q { 500 } else { 5_000 },
        shards: p.shards,
    }
}

pub(crate) fn progress() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:<38} {bar:30} {pos}/{len} ({per_sec})")
            .expect("template"),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

pub(crate) fn phase(bar: &ProgressBar, msg: &str, len: u64) {
    bar.set_message(msg.to_owned());
    bar.set_length(len);
    bar.set_position(0);
    bar.reset_eta();
}

async fn measure(
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

/// CPU time this process (every thread) spent since `start`: on a machine the database shares,
/// what the client spends per job is taken from the database.
struct CpuClock(Duration);

impl CpuClock {
    fn now() -> Duration {
        use nix::sys::resource::{UsageWho, getrusage};
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
        };
        getrusage(UsageWho::RUSAGE_SELF)
            .map(|u| tv(u.user_time()) + tv(u.system_time()))
            .unwrap_or_default()
    }

    fn start() -> Self {
        CpuClock(Self::now())
    }

    /// Microseconds of CPU per job, over `jobs` jobs.
    fn us_per(&self, jobs: u64) -> f64 {
        (Self::now() - self.0).as_secs_f64() * 1e6 / jobs.max(1) as f64
    }
}

/// Log bytes per job between two readings of the server's log position (NaN when there is none).
pub(crate) fn per_job(before: Option<i64>, after: Option<i64>, jobs: u64) -> f64 {
    match (before, after) {
        (Some(b), Some(a)) => (a - b) as f64 / jobs.max(1) as f64,
        _ => f64::NAN,
    }
}

/// The median over rounds of each round's ratio `a[i] / b[i]`: the two sides of a round ran
/// minutes apart at most, so their ratio holds when the machine's speed drifts between rounds.
fn paired(a: &[f64], b: &[f64]) -> f64 {
    let ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    median(&ratios)
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN, // not measured: null in --json
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
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

/// Runs a bare statement (or transaction) again while PostgreSQL picks it as a deadlock's victim
/// or it gave up waiting on a lock (rolled back whole), as a hand-written loop would and as the
/// runtime does with its own.
/// Claimers that lock rows SKIP LOCKED can still wait on each other when they meet a row whose
/// newer version another is deleting.
async fn retry_deadlocks<T, Fut>(call: impl Fn() -> Fut) -> Result<T, backlog::sqlx::Error>
where
    Fut: std::future::Future<Output = Result<T, backlog::sqlx::Error>>,
{
    loop {
        match call().await {
            // A deadlock victim (PostgreSQL's code, MySQL's), or (PostgreSQL) a statement that
            // gave up a lock wait after its own lock_timeout: rolled back whole either way.
            Err(backlog::sqlx::Error::Database(e))
                if matches!(e.code().as_deref(), Some("40P01" | "40001" | "55P03")) => {}
            other => return other,
        }
    }
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

/// A worker whose handler does nothing but count. The progress display follows the count ten
/// times a second, from a task of its own: the bare loops move it once a batch, and a display
/// update per job (a clock read and shared counters) would count against the runtime.
pub(crate) fn noop_worker(
    client: &Arc<Client>,
    queue: &str,
    concurrency: u64,
    done: Arc<AtomicU64>,
    bar: &ProgressBar,
) -> anyhow::Result<backlog::WorkerBuilder> {
    awaiting_worker(client, queue, concurrency, done, bar, Duration::ZERO)
}

/// [`noop_worker`] whose handler first awaits `wait`, as a handler waiting on I/O would, and
/// counts the job once it has (zero: no wait, the no-op handler).
pub(crate) fn awaiting_worker(
    client: &Arc<Client>,
    queue: &str,
    concurrency: u64,
    done: Arc<AtomicU64>,
    bar: &ProgressBar,
    wait: Duration,
) -> anyhow::Result<backlog::WorkerBuilder> {
    let (counted, bar) = (Arc::downgrade(&done), bar.clone());
    tokio::spawn(async move {
        let mut shown = 0;
        // Ends once the worker (its handler holds the count) and the caller are done with it.
        while let Some(done) = counted.upgrade() {
            let n = done.load(Ordering::Relaxed);
            bar.inc(n - shown);
            shown = n;
            drop(done);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let builder = Worker::builder(client.clone()).queue(queue, concurrency as usize);
    let builder = match wait.is_zero() {
        true => builder.fallback_handler(move |_ctx: JobContext| {
            done.fetch_add(1, Ordering::Relaxed);
            async { Ok(Outcome::Complete) }
        }),
        false => builder.fallback_handler(move |_ctx: JobContext| {
            let done = done.clone();
            async move {
                tokio::time::sleep(wait).await;
                done.fetch_add(1, Ordering::Relaxed);
                Ok(Outcome::Complete)
            }
        }),
    };
    Ok(builder.configure(|c| c.maintenance = None))
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

fn human(r: &Report) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_pair_each_round() {
        // A machine that halves its speed between rounds: the rounds' own ratios hold.
        let ours = [90.0, 45.0, 44.0];
        let base = [100.0, 50.0, 40.0];
        assert!((paired(&ours, &base) - 0.9).abs() < 1e-9);
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < 1e-9);
        assert!((median(&[4.0, 1.0]) - 2.5).abs() < 1e-9);
        assert!(median(&[]).is_nan());
        assert!(paired(&[], &[]).is_nan());
    }

    #[test]
    fn the_bare_drain_tries_more_loops_while_each_claims_enough() {
        assert_eq!(fold_loops("sqlite", 500), vec![1]);
        assert_eq!(fold_loops("postgres", 100), vec![2]);
        assert_eq!(fold_loops("postgres", 200), vec![2, 4]);
        assert_eq!(fold_loops("mysql", 399), vec![2, 4]);
        assert_eq!(fold_loops("postgres", 400), vec![2, 4, 8]);
        assert_eq!(fold_loops("postgres", 1), vec![2]);
    }
}
