//! `backlog bench --processes 1,4,16,64`: one queue drained by that many worker processes at
//! once, each a `backlog-bench` of its own with its own pool (the hidden `process` command), as
//! separate machines' workers would. Each process says when it is connected; the clock starts
//! when every one of them is, and stops when their handlers have run every job (each process
//! tells its count as it goes). A URL that lists several hosts is given to process `i` from
//! host `i` on (mod their number): the processes spread over the hosts. Reported per count:
//! the rate, the connections the server saw at most, and how many times the handlers ran,
//! which must be the number of jobs (a job run twice would show), beside the completed rows
//! counted in the database: both equal to the number of jobs is each job completed exactly once.
//! `--payload-bytes` pads each job's payload and `--handler-ms` makes each handler await that
//! long before it completes, as a handler waiting on I/O would (the realistic phase: 1 KiB
//! payloads, 1 ms handlers, 4 processes). Each run also reports the bytes the server wrote to its
//! write-ahead log (WAL or redo) per job.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backlog::{BackendConfig, CancellationToken, Client, QueueName, QueueSettings};
use indicatif::ProgressBar;
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::args::ProcessArgs;
use crate::baseline::Baseline;
use crate::util::{awaiting_worker, per_job, phase};

/// What `--processes` runs with.
#[derive(Debug, Clone, Serialize)]
pub struct ProcsParams {
    pub backend: String,
    /// Jobs per run.
    pub jobs: u64,
    /// The process counts, one run each.
    pub processes: Vec<u64>,
    /// Jobs each process runs at once.
    pub concurrency: u64,
    /// Most connections each process's pool opens.
    pub connections: u32,
    /// Bytes of padding in each payload.
    pub payload_bytes: u64,
    /// Milliseconds each handler awaits before it completes its job.
    pub handler_ms: u64,
    /// The queue's claim heads (`--shards`).
    pub shards: u16,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ProcsRun {
    pub processes: u64,
    pub jobs_per_s: f64,
    /// Handler runs over every process: the number of jobs, when none ran twice.
    pub handler_runs: u64,
    /// Jobs completed in the database.
    pub completed: i64,
    /// Most connections the server had open to this database at once (sampled every 100 ms;
    /// through a pooler, the pooler's server connections).
    pub most_server_connections: i64,
    /// Seconds from the start until every process had connected (not timed in the rate).
    pub start_secs: f64,
    /// Bytes the server wrote to its WAL or redo log per job while the processes drained
    /// (null on SQLite).
    pub log_bytes_per_job: f64,
}

/// The figures (`--json` prints this).
#[derive(Debug, Clone, Serialize)]
pub struct ProcsReport {
    pub runs: Vec<ProcsRun>,
    pub params: ProcsParams,
}

pub async fn run(
    client: &Arc<Client>,
    base: &Baseline,
    url: &str,
    q: &dyn Fn(&str) -> String,
    p: &ProcsParams,
    bar: &ProgressBar,
) -> anyhow::Result<ProcsReport> {
    let mut runs = vec![];
    for &n in &p.processes {
        let queue = q(&format!("procs_{n}"));
        let mut s = QueueSettings::defaults(QueueName::new(&queue)?);
        s.retention = backlog::Retention::Keep; // completed rows are counted afterwards
        s.shards = p.shards;
        client.queue_configure(&s).await?;
        phase(bar, &format!("{n} processes: queueing"), p.jobs);
        let mut left = p.jobs;
        let pad = "x".repeat(p.payload_bytes as usize);
        while left > 0 {
            let k = left.min(1000);
            let jobs = (0..k)
                .map(|i| match pad.is_empty() {
                    true => client.new_job(&queue, &i),
                    false => client.new_job(&queue, &serde_json::json!({ "i": i, "pad": pad })),
                })
                .collect::<backlog::Result<Vec<_>>>()?;
            client.enqueue_many(jobs).await?;
            bar.inc(k);
            left -= k;
        }
        phase(bar, &format!("{n} processes: drain"), p.jobs);
        runs.push(drain(base, url, &queue, n, p, bar).await?);
        let stats = client.stats(Some(&QueueName::new(&queue)?)).await?;
        let run = runs.last_mut().expect("pushed");
        run.completed = stats.first().map_or(0, |(_, s)| s.completed);
        if run.completed != p.jobs as i64 || run.handler_runs != p.jobs {
            anyhow::bail!(
                "{n} processes: {} jobs completed and {} handler runs, of {} jobs",
                run.completed,
                run.handler_runs,
                p.jobs
            );
        }
    }
    Ok(ProcsReport {
        runs,
        params: p.clone(),
    })
}

/// Starts `n` processes on `queue`, lets them go together, stops the clock when their handlers
/// have run every job, then stops them (their last completions commit as they shut down).
async fn drain(
    base: &Baseline,
    url: &str,
    queue: &str,
    n: u64,
    p: &ProcsParams,
    bar: &ProgressBar,
) -> anyhow::Result<ProcsRun> {
    let exe = std::env::current_exe()?;
    let began = Instant::now();
    let mut children = vec![];
    for i in 0..n {
        let url = backlog::rotate_hosts(url, i as usize);
        let child = tokio::process::Command::new(&exe)
            .env("BACKLOG_DATABASE_URL", &url)
            .args(["process", queue])
            .args(["--concurrency", &p.concurrency.to_string()])
            .args(["--connections", &p.connections.to_string()])
            .args(["--handler-ms", &p.handler_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        children.push(child);
    }
    // Every process connected and ready before the clock starts.
    let mut outs = vec![];
    for child in &mut children {
        let out = child.stdout.take().expect("piped");
        let mut out = BufReader::new(out).lines();
        match out.next_line().await? {
            Some(l) if l == "ready" => outs.push(out),
            other => anyhow::bail!("a worker process did not start: {other:?}"),
        }
    }
    let start_secs = began.elapsed().as_secs_f64();
    let most = Arc::new(AtomicI64::new(0));
    let stop = CancellationToken::new();
    let sampler = tokio::spawn({
        let (base, most, stop) = (base.clone(), most.clone(), stop.clone());
        async move {
            while !stop.is_cancelled() {
                if let Ok(c) = base.server_connections().await {
                    most.fetch_max(c, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    // Each process's running count (`ran N` lines), then its final one (`done N`).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, u64, bool)>();
    for (i, mut out) in outs.into_iter().enumerate() {
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                let (last, k) = match line.split_once(' ') {
                    Some(("ran", k)) => (false, k),
                    Some(("done", k)) => (true, k),
                    _ => continue,
                };
                if let Ok(k) = k.parse() {
                    let _ = tx.send((i, k, last));
                }
            }
        });
    }
    drop(tx);
    let mut stdins: Vec<_> = (children.iter_mut())
        .map(|c| c.stdin.take().expect("piped"))
        .collect();
    let log = base.log_bytes().await?;
    let started = Instant::now();
    for stdin in &mut stdins {
        stdin.write_all(b"go\n").await?;
        stdin.flush().await?;
    }
    let mut ran = vec![0u64; n as usize];
    let mut shown = 0;
    let mut secs = None;
    let mut log_bytes_per_job = f64::NAN;
    let mut finished = 0;
    while let Some((i, k, last)) = rx.recv().await {
        ran[i] = k;
        let total: u64 = ran.iter().sum();
        bar.inc(total.saturating_sub(shown));
        shown = shown.max(total);
        if secs.is_none() && total >= p.jobs {
            secs = Some(started.elapsed().as_secs_f64());
            log_bytes_per_job = per_job(log, base.log_bytes().await?, p.jobs);
            for stdin in &mut stdins {
                stdin.write_all(b"stop\n").await?;
                stdin.flush().await?;
            }
        }
        if last {
            finished += 1;
            if finished == n {
                break;
            }
        }
    }
    for child in &mut children {
        let status = child.wait().await?;
        anyhow::ensure!(status.success(), "a worker process failed: {status}");
    }
    stop.cancel();
    sampler.await?;
    let Some(secs) = secs else {
        anyhow::bail!(
            "the processes ended after {} of {} jobs",
            ran.iter().sum::<u64>(),
            p.jobs
        );
    };
    Ok(ProcsRun {
        processes: n,
        jobs_per_s: p.jobs as f64 / secs,
        handler_runs: ran.iter().sum(),
        completed: 0,
        most_server_connections: most.load(Ordering::Relaxed),
        start_secs,
        log_bytes_per_job,
    })
}

/// The hidden `backlog-bench process QUEUE`: connects with a pool of `connections`, says
/// `ready`, waits for `go` on stdin, works `queue` with a handler that awaits `handler` (none:
/// a no-op) telling its handler runs (`ran N`, every 20 ms while they change), and at `stop`
/// (or the end of stdin) shuts down and prints `done N`.
pub async fn child(url: &str, a: &ProcessArgs) -> anyhow::Result<()> {
    let (queue, concurrency, handler) = (
        a.queue.as_str(),
        a.concurrency,
        Duration::from_millis(a.handler_ms),
    );
    let config = BackendConfig {
        max_connections: a.connections,
        ..BackendConfig::default()
    };
    let client = Arc::new(Client::connect_with(url, &config).await?);
    // One round trip first, so that the pool has its connection before the clock starts.
    client.queue_settings(&QueueName::new(queue)?).await?;
    println!("ready");
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    stdin.next_line().await?;
    let done = Arc::new(AtomicU64::new(0));
    let worker = awaiting_worker(
        &client,
        queue,
        concurrency,
        done.clone(),
        &ProgressBar::hidden(),
        handler,
    )?
    .configure(|c| c.poll_max = Duration::from_millis(100))
    .build()?;
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (worker, stop) = (worker.clone(), stop.clone());
        async move { worker.run(stop).await }
    });
    let report = tokio::spawn({
        let (done, stop) = (done.clone(), stop.clone());
        async move {
            let mut told = 0;
            while !stop.is_cancelled() {
                let k = done.load(Ordering::Relaxed);
                if k != told {
                    println!("ran {k}");
                    told = k;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    stdin.next_line().await?;
    stop.cancel();
    run.await??;
    report.await?;
    println!("done {}", done.load(Ordering::Relaxed));
    client.close().await;
    Ok(())
}

pub fn human(r: &ProcsReport) -> String {
    let p = &r.params;
    let mut s = format!(
        "{} jobs drained by N worker processes ({}, {} slots and at most {} connections each; \
         payload padding {} bytes, handlers await {} ms; {} shards)\n\n",
        p.jobs, p.backend, p.concurrency, p.connections, p.payload_bytes, p.handler_ms, p.shards
    );
    s += "processes   jobs/s   server connections (most)   handler runs   completed   \
          log B/job   start (s)\n";
    for run in &r.runs {
        s += &format!(
            "{:>9}   {:>6.0}   {:>26}   {:>12}   {:>9}   {:>9}   {:>9.1}\n",
            run.processes,
            run.jobs_per_s,
            run.most_server_connections,
            run.handler_runs,
            run.completed,
            match run.log_bytes_per_job.is_nan() {
                true => "-".to_owned(),
                false => format!("{:.0}", run.log_bytes_per_job),
            },
            run.start_secs
        );
    }
    s
}
