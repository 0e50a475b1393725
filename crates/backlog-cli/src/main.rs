//! The `backlog` command: thin argument parsing over the `backlog` library.

mod admin;
mod args;
mod bench;
mod cli;
mod demo;
mod enqueue;
mod output;
mod serve;
mod telemetry;
mod work;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

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
    let cli = cli::Cli::parse();
    let provider = match cli.otlp_endpoint.as_deref().map(telemetry::provider) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("error: {}", message(&e));
            return ExitCode::FAILURE;
        }
    };
    // Colour only on a terminal (not in files or journald), and never under NO_COLOR.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_env("BACKLOG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        );
    let spans = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(telemetry::tracer(p))
            .with_filter(telemetry::span_filter())
    });
    tracing_subscriber::registry().with(logs).with(spans).init();
    let url = cli.database_url.clone();
    let code = match cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", message(&e));
            if let Some(fix) = fix(&e, &url) {
                eprintln!("{fix}");
            }
            ExitCode::FAILURE
        }
    };
    if let Some(p) = provider {
        telemetry::shutdown(p).await;
    }
    code
}

/// The command that fixes the error, where there is one: the migration of a schema that is
/// missing or too old, with the URL this command used (its password redacted).
fn fix(e: &anyhow::Error, url: &str) -> Option<String> {
    match e.chain().find_map(|c| c.downcast_ref::<backlog::Error>())? {
        backlog::Error::SchemaOutdated { .. } => Some(format!(
            "to fix it: backlog --database-url '{}' migrate",
            backlog::redact_url(url)
        )),
        _ => None,
    }
}

/// The error and its causes on one line, skipping causes the message above already quotes.
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}
