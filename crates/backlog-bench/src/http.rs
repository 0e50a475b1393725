//! The HTTP phase: what `backlog serve` costs over the library. A server runs in this process on
//! a loopback port (real TCP, real JSON); each round enqueues the same jobs in batches through
//! the API and through the library, drains each set (API: claim and complete over HTTP;
//! library: `Client::claim` and `complete_refs`) with the same number of loops, and then times
//! `GET /api/v1/jobs/{id}` while the worker runtime drains a queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backlog::{CancellationToken, ClaimOpts, Client, DrainMode, JobRef, QueueName};
use indicatif::ProgressBar;
use serde_json::{Value, json};

use crate::params::Params;
use crate::util::{median, noop_worker, paired, phase};

/// Concurrent HTTP clients (and library tasks) in the enqueue and drain loops.
const LOOPS: u64 = 4;

/// The HTTP phase's figures.
pub struct Http {
    pub enqueue: Vec<f64>,
    pub enqueue_lib: Vec<f64>,
    pub drain: Vec<f64>,
    pub drain_lib: Vec<f64>,
    pub show_p50_ms: f64,
    pub show_p99_ms: f64,
}

impl Http {
    pub fn enqueue_ratio(&self) -> f64 {
        paired(&self.enqueue, &self.enqueue_lib)
    }

    pub fn drain_ratio(&self) -> f64 {
        paired(&self.drain, &self.drain_lib)
    }
}

/// Jobs per round: a fifth of the drain's, at least 2,000.
fn jobs(p: &Params) -> u64 {
    (p.batch_jobs / 5).max(2_000)
}

pub async fn measure(
    client: &Arc<Client>,
    q: &dyn Fn(&str) -> String,
    p: &Params,
    bar: &ProgressBar,
) -> anyhow::Result<Http> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = backlog_server::router(client.clone(), &backlog_server::ServerConfig::new(addr));
    let stop = CancellationToken::new();
    let server = tokio::spawn({
        let stop = stop.clone();
        async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        }
    });
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();
    let mut out = Http {
        enqueue: vec![],
        enqueue_lib: vec![],
        drain: vec![],
        drain_lib: vec![],
        show_p50_ms: f64::NAN,
        show_p99_ms: f64::NAN,
    };
    let n = jobs(p);
    for round in 1..=p.rounds {
        let tag = format!("round {round}/{}", p.rounds);
        let (api_q, lib_q) = (q("http_api"), q("http_lib"));
        let api_first = round % 2 == 1;
        for api in [api_first, !api_first] {
            let what = if api { "HTTP API" } else { "library" };
            phase(bar, &format!("{tag}: enqueue, batched ({what})"), n);
            let started = Instant::now();
            if api {
                let (http, url, queue) = (
                    http.clone(),
                    format!("{base}/api/v1/jobs/batch"),
                    api_q.clone(),
                );
                loops(
                    n,
                    p.batch_size,
                    move |from, count| {
                        let (http, url, queue) = (http.clone(), url.clone(), queue.clone());
                        async move {
                            // The body is written as text: this load generator shares the
                            // machine (and this process) with the server it measures.
                            let mut body = String::with_capacity(count as usize * 48 + 16);
                            body.push_str("{\"jobs\":[");
                            for i in from..from + count {
                                if i > from {
                                    body.push(',');
                                }
                                body.push_str(&format!(
                                    r#"{{"queue":"{queue}","payload":{{"i":{i}}}}}"#
                                ));
                            }
                            body.push_str("]}");
                            let res = http
                                .post(url)
                                .header("content-type", "application/json")
                                .body(body)
                                .send()
                                .await?;
                            anyhow::ensure!(
                                res.status().is_success(),
                                "batch enqueue: {}",
                                res.status()
                            );
                            Ok(())
                        }
                    },
                    bar,
                )
                .await?;
                out.enqueue.push(n as f64 / started.elapsed().as_secs_f64());
            } else {
                let (client, queue) = (client.clone(), lib_q.clone());
                loops(
                    n,
                    p.batch_size,
                    move |from, count| {
                        let (client, queue) = (client.clone(), queue.clone());
                        async move {
                            let jobs = (from..from + count)
                                .map(|i| client.new_job(&queue, &json!({ "i": i })))
                                .collect::<backlog::Result<Vec<_>>>()?;
                            client.enqueue_many(jobs).await?;
                            Ok(())
                        }
                    },
                    bar,
                )
                .await?;
                out.enqueue_lib
                    .push(n as f64 / started.elapsed().as_secs_f64());
            }
        }
        for api in [api_first, !api_first] {
            let what = if api { "HTTP API" } else { "library" };
            phase(bar, &format!("{tag}: claim and complete ({what})"), n);
            let done = Arc::new(AtomicU64::new(0));
            let started = Instant::now();
            let mut tasks = vec![];
            for _ in 0..LOOPS {
                let (http, base, client, done, bar) = (
                    http.clone(),
                    base.clone(),
                    client.clone(),
                    done.clone(),
                    bar.clone(),
                );
                let (api_q, lib_q) = (api_q.clone(), lib_q.clone());
                let limit = p.batch_size;
                tasks.push(tokio::spawn(async move {
                    loop {
                        let got = if api {
                            drain_api_once(&http, &base, &api_q, limit).await?
                        } else {
                            drain_lib_once(&client, &lib_q, limit).await?
                        };
                        if got == 0 {
                            return anyhow::Ok(());
                        }
                        done.fetch_add(got, Ordering::Relaxed);
                        bar.inc(got);
                    }
                }));
            }
            for t in tasks {
                t.await??;
            }
            let rate = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
            anyhow::ensure!(
                done.load(Ordering::Relaxed) == n,
                "drained {} of {n}",
                done.load(Ordering::Relaxed)
            );
            if api {
                out.drain.push(rate);
            } else {
                out.drain_lib.push(rate);
            }
        }
    }

    // Job show while the runtime drains a queue.
    let show_q = q("http_show");
    let one = client
        .enqueue(client.new_job(&q("http_probe"), &json!({}))?)
        .await?
        .id;
    let fill: Vec<_> = (0..n)
        .map(|i| client.new_job(&show_q, &json!({ "i": i })))
        .collect::<backlog::Result<_>>()?;
    for chunk in fill.chunks(1000) {
        client.enqueue_many(chunk.to_vec()).await?;
    }
    phase(bar, "job show while the runtime drains", n);
    let worker = noop_worker(
        client,
        &show_q,
        p.concurrency,
        Arc::new(AtomicU64::new(0)),
        bar,
    )?
    .configure(|c| c.drain = Some(DrainMode::All))
    .build()?;
    let draining = tokio::spawn(async move { worker.run(CancellationToken::new()).await });
    let mut lat = vec![];
    let url = format!("{base}/api/v1/jobs/{one}");
    while !draining.is_finished() {
        let t = Instant::now();
        let res = http.get(&url).send().await?;
        anyhow::ensure!(res.status().is_success(), "job show: {}", res.status());
        res.bytes().await?;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    draining.await??;
    lat.sort_by(f64::total_cmp);
    if !lat.is_empty() {
        out.show_p50_ms = median(&lat);
        out.show_p99_ms = lat[((lat.len() as f64 * 0.99) as usize).min(lat.len() - 1)];
    }
    stop.cancel();
    server.await??;
    Ok(out)
}

/// Runs `batch(from, count)` over `0..n` in batches of `size`, from [`LOOPS`] tasks.
async fn loops<F, Fut>(n: u64, size: u64, batch: F, bar: &ProgressBar) -> anyhow::Result<()>
where
    F: Fn(u64, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = vec![];
    for _ in 0..LOOPS {
        let (next, batch, bar) = (next.clone(), batch.clone(), bar.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let from = next.fetch_add(size, Ordering::Relaxed);
                if from >= n {
                    return anyhow::Ok(());
                }
                let count = size.min(n - from);
                batch(from, count).await?;
                bar.inc(count);
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// One claim and its completion over HTTP; the jobs taken.
async fn drain_api_once(
    http: &reqwest::Client,
    base: &str,
    queue: &str,
    limit: u64,
) -> anyhow::Result<u64> {
    let res = http
        .post(format!("{base}/api/v1/queues/{queue}/claim"))
        .json(&json!({ "limit": limit }))
        .send()
        .await?;
    anyhow::ensure!(res.status().is_success(), "claim: {}", res.status());
    let body: Value = res.json().await?;
    let jobs = body["jobs"].as_array().cloned().unwrap_or_default();
    if jobs.is_empty() {
        return Ok(0);
    }
    let refs: Vec<Value> = jobs
        .iter()
        .map(|j| json!({"id": j["id"], "token": j["token"]}))
        .collect();
    let res = http
        .post(format!("{base}/api/v1/queues/{queue}/complete"))
        .json(&json!({ "jobs": refs }))
        .send()
        .await?;
    anyhow::ensure!(res.status().is_success(), "complete: {}", res.status());
    let body: Value = res.json().await?;
    anyhow::ensure!(
        body["lost"].as_array().is_some_and(|l| l.is_empty()),
        "lost leases: {body}"
    );
    Ok(jobs.len() as u64)
}

/// The same through the library.
async fn drain_lib_once(client: &Client, queue: &str, limit: u64) -> anyhow::Result<u64> {
    let claimed = client
        .claim(&ClaimOpts::new(queue)?.limit(limit as u32))
        .await?;
    if claimed.is_empty() {
        return Ok(0);
    }
    let refs: Vec<JobRef> = claimed.iter().map(|c| c.job_ref()).collect();
    let done = client.complete_refs(&QueueName::new(queue)?, refs).await?;
    anyhow::ensure!(done.len() == claimed.len(), "lost leases");
    Ok(claimed.len() as u64)
}
