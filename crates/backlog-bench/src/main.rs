//! `backlog-bench`, which `backlog bench` runs: the benchmark of the `backlog` library against
//! bare SQL on the same database ([`baseline`]), kept out of the shipped `backlog` binary. The
//! default run measures enqueue, drain, latency, the S2 replay and the HTTP API ([`figures`]);
//! `--soak`, `--overload`, `--processes`, `--flow` and `--grow` are long runs of their own.

mod args;
mod baseline;
mod figures;
mod flow;
mod grow;
mod http;
mod params;
mod procs;
mod s2;
mod soak;
mod util;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use backlog::{BackendConfig, Client};
use clap::Parser;
use serde::Serialize;

use args::{BenchArgs, Cli, Process};
use baseline::Baseline;
use util::progress;

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let code = runtime.block_on(main_async());
    // Not a plain drop, which waits for every worker thread: a task that never yields keeps it
    // waiting for good. sqlx 0.9's pool maintenance did so after its pool was closed (it walked
    // an idle count that had wrapped below zero: sqlx issue 3645, fixed upstream by pull request
    // 4289 but in no release yet), and a worker process hung at exit; CI saw it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    code
}

async fn main_async() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BACKLOG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let done = match cli.process {
        Some(Process::Process(p)) => procs::child(&cli.database_url, &p)
            .await
            .map(|()| ExitCode::SUCCESS),
        None => run(&cli.database_url, cli.bench).await,
    };
    done.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}

/// Runs the benchmark.
async fn run(url: &str, a: BenchArgs) -> anyhow::Result<ExitCode> {
    params::check_hold(url, &a)?;
    let p = params::params(url, &a);
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
    let result = if let Some(d) = a.soak {
        let sp = params::soak_params(&p, &a, d);
        soak::soak(&client, &base, &q("soak"), &sp, &bar)
            .await
            .and_then(|r| render(&r, a.json, soak::soak_human))
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
            .and_then(|r| render(&r, a.json, soak::overload_human))
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
            .and_then(|r| render(&r, a.json, procs::human))
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
            .and_then(|r| render(&r, a.json, flow::human))
    } else if a.grow {
        let gp = params::grow_params(&p, &a);
        grow::run(&client, &base, &q, &gp, &bar)
            .await
            .and_then(|r| render(&r, a.json, grow::human))
    } else {
        figures::measure(url, &client, &base, &prefix, &p, &bar)
            .await
            .and_then(|r| render(&r, a.json, figures::human))
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

/// A report as JSON, or for people by `human`.
fn render<R: Serialize>(r: &R, json: bool, human: fn(&R) -> String) -> anyhow::Result<String> {
    Ok(match json {
        true => serde_json::to_string_pretty(r)? + "\n",
        false => human(r),
    })
}
