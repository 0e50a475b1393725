//! `backlog work QUEUE… -- CMD`: the worker runtime with a handler that runs CMD once per job.
//! The runtime brings heartbeats, timeouts, batched completion, maintenance and graceful shutdown.

use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use backlog::{CancellationToken, Client, DrainMode, HandlerResult, JobContext, Outcome, Worker};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use clap::Args;

use crate::args::{kinds, parse_duration, queue_name};

#[derive(Debug, Args)]
pub struct WorkArgs {
    /// Queues to work.
    #[arg(required = true, num_args = 1..)]
    pub queues: Vec<String>,
    /// The command to run per job, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    pub cmd: Vec<String>,
    /// Jobs run at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrency: u32,
    /// Lease length (default: the queue's); heartbeats renew it while the command runs.
    #[arg(long, value_parser = parse_duration)]
    pub lease: Option<Duration>,
    /// Kill the command and fail the job after this long.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Exit 0 once no job this worker may take (of these queues, and of --kind's kinds) is
    /// available, scheduled, running or waiting to retry. A paused queue's jobs are left for
    /// after the resume: the drain ends with a warning.
    #[arg(long)]
    pub drain: bool,
    /// Only jobs of these kinds.
    #[arg(long = "kind")]
    pub kinds: Vec<String>,
    /// Longest wait between polls when the queues are empty.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub poll: Duration,
    /// On SIGINT/SIGTERM, how long running jobs may finish before they are stopped and released.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Serve this process's own Prometheus metrics at http://ADDR/metrics (its running jobs per
    /// queue, claim durations, outcomes).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// Bytes of the command's stderr kept for the job's error history.
const STDERR_TAIL: usize = 2048;

/// Runs the command.
pub async fn run(client: Client, a: WorkArgs) -> anyhow::Result<ExitCode> {
    for q in &a.queues {
        queue_name(q)?;
    }
    kinds(&a.kinds)?;
    let cmd = Arc::new(a.cmd.clone());
    let mut builder = Worker::builder(Arc::new(client)).fallback_handler(move |ctx| {
        let cmd = cmd.clone();
        async move { run_command(&cmd, ctx).await }
    });
    for q in &a.queues {
        builder = builder.queue(q, a.concurrency as usize);
    }
    if !a.kinds.is_empty() {
        let kinds: Vec<&str> = a.kinds.iter().map(String::as_str).collect();
        builder = builder.kinds(&kinds);
    }
    let worker = builder
        .configure(|c| {
            c.lease = a.lease;
            c.job_timeout = a.timeout;
            c.grace = a.grace;
            c.poll_max = a.poll;
            c.drain = a.drain.then_some(DrainMode::All);
        })
        .build()?;
    let (shutdown, abort) = (CancellationToken::new(), CancellationToken::new());
    spawn_signal_handler(shutdown.clone(), abort.clone());
    let worker = Arc::new(worker);
    let metrics = match a.metrics {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr} for metrics: {e}"))?;
            let app = backlog_server::worker_router(worker.clone());
            let stop = shutdown.clone();
            Some(tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move { stop.cancelled().await })
                    .await
            }))
        }
        None => None,
    };
    let report = worker.run_until(shutdown.clone(), abort).await?;
    // A drain ends without a signal: the metrics server stops with the worker.
    shutdown.cancel();
    if let Some(m) = metrics {
        m.await??;
    }
    tracing::info!("worker stopped: {report:?}");
    worker.client().close().await;
    Ok(ExitCode::SUCCESS)
}

fn spawn_signal_handler(stop: CancellationToken, abort: CancellationToken) {
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        let mut signals = 0;
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            signals += 1;
            if signals == 1 {
                eprintln!(
                    "backlog: stopping; running jobs may finish (signal again to stop them now)"
                );
                stop.cancel();
            } else {
                abort.cancel();
            }
        }
    });
}

/// A stdout line of the command that reports progress: `backlog:progress {json}`.
const PROGRESS: &str = "backlog:progress ";
/// A stdout line of the command that sets the job's result: `backlog:result {json}`.
const RESULT: &str = "backlog:result ";

/// `TRACEPARENT` and `TRACESTATE` for the command (the environment carrier OpenTelemetry SDKs
/// read): the job's own span when spans are exported, else the enqueuer's. The variables of
/// this process are replaced, never passed on from an unrelated trace.
fn trace_env(job: &backlog::ClaimedJob) -> Vec<(&'static str, String)> {
    let tc = backlog::trace::current().or_else(|| job.trace_context.clone());
    match tc {
        Some(tc) => {
            let mut env = vec![("TRACEPARENT", tc.traceparent().to_owned())];
            env.extend(tc.tracestate().map(|s| ("TRACESTATE", s.to_owned())));
            env
        }
        None => vec![],
    }
}

/// Runs CMD for one job: payload on stdin, the job in its environment. Exit 0 completes the job;
/// anything else fails it with the tail of stderr. Stdout passes through, except the lines
/// `backlog:progress JSON` (stored as the job's progress at once) and `backlog:result JSON` (the
/// last one is stored as its result on success). Dropping this future (timeout, cancellation,
/// lost lease, shutdown) kills the command.
async fn run_command(cmd: &[String], ctx: JobContext) -> HandlerResult {
    let job = ctx.job();
    let child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .env("BACKLOG_JOB_ID", job.id.to_string())
        .env("BACKLOG_QUEUE", &job.queue)
        .env("BACKLOG_ATTEMPT", job.attempt.to_string())
        .env_remove("TRACEPARENT")
        .env_remove("TRACESTATE")
        .envs(trace_env(job))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            cannot_start(&cmd[0], &e);
            let msg = format!("cannot run {:?}: {e}", cmd[0]);
            attempt_failed(&ctx, &msg).await;
            return Err(msg.into());
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let payload = job.payload.clone();
        tokio::spawn(async move {
            // A command that does not read its stdin is fine: ignore broken pipes.
            let _ = stdin.write_all(payload.as_bytes()).await;
        });
    }
    let tail = child.stderr.take().map(|mut err| {
        tokio::spawn(async move {
            let mut tail: Vec<u8> = vec![];
            let mut buf = [0u8; 4096];
            let mut out = tokio::io::stderr();
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let _ = out.write_all(&buf[..n]).await;
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
            String::from_utf8_lossy(&tail).trim().to_owned()
        })
    });
    let mut result = None;
    if let Some(out) = child.stdout.take() {
        let mut lines = BufReader::new(out).lines();
        let mut stdout = tokio::io::stdout();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(json) = line.strip_prefix(PROGRESS) {
                match serde_json::from_str::<serde_json::Value>(json) {
                    Ok(v) => ctx.progress(&v).await?,
                    Err(e) => eprintln!(
                        "backlog: job {}: ignored progress that is not JSON ({e})",
                        job.id
                    ),
                }
            } else if let Some(json) = line.strip_prefix(RESULT) {
                match serde_json::from_str::<serde_json::Value>(json) {
                    Ok(v) => result = Some(v),
                    Err(e) => eprintln!(
                        "backlog: job {}: ignored a result that is not JSON ({e})",
                        job.id
                    ),
                }
            } else {
                let _ = stdout.write_all(format!("{line}\n").as_bytes()).await;
            }
        }
    }
    let status = child
        .wait()
        .await
        .map_err(|e| format!("waiting for the command failed: {e}"))?;
    let tail = match tail {
        Some(h) => h.await.unwrap_or_default(),
        None => String::new(),
    };
    if status.success() {
        return Ok(match result {
            Some(v) => Outcome::CompleteWith(v),
            None => Outcome::Complete,
        });
    }
    let mut msg = format!("command {status}");
    let last = tail.lines().last().unwrap_or_default();
    attempt_failed(
        &ctx,
        &format!("{msg}{}{last}", if last.is_empty() { "" } else { ": " }),
    )
    .await;
    if !tail.is_empty() {
        msg.push_str(": ");
        msg.push_str(&tail);
    }
    Err(msg.into())
}

/// Says on stderr that an attempt failed, and why (the job's error history keeps the whole tail
/// of the command's stderr; `job show` prints it).
async fn attempt_failed(ctx: &JobContext, why: &str) {
    let job = ctx.job();
    let max = match job.max_attempts {
        Some(max) => Some(max),
        None => match backlog::QueueName::new(&job.queue) {
            Ok(queue) => (ctx.client().queue_settings(&queue).await)
                .ok()
                .map(|s| s.max_attempts),
            Err(_) => None,
        },
    };
    let (of, next) = match max {
        Some(max) if job.attempt >= max => (format!(" of {max}"), "no attempt left: dead"),
        Some(max) => (format!(" of {max}"), "it will be retried"),
        None => (String::new(), "it may be retried"),
    };
    eprintln!(
        "backlog: job {} ({}) attempt {}{of} failed ({next}): {why}",
        job.id, job.queue, job.attempt
    );
}

/// Says once, loudly, that the command cannot be started at all: every job will fail the same
/// way until it can.
fn cannot_start(program: &str, e: &std::io::Error) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "backlog: error: cannot start the command {program:?}: {e}. Every job will fail \
             until it can be started: is it on PATH (or given by its path), and executable?"
        )
    });
}
