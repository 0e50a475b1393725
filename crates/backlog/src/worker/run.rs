//! The run loop: one fetcher per queue, the heartbeater, the completer, maintenance, shutdown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::completer::Completer;
use super::execute::{self, StopReason};
use super::{DrainMode, ErasedHandler, PeriodicJob, WorkerConfig};
use crate::{ClaimOpts, Client, Error, JobRef, Kind, QueueName, QueueSettings, Result};

/// Longest wait for more free slots before a claim, while jobs are still in flight.
const GATHER: Duration = Duration::from_millis(2);

/// Shortest wait between polls of an empty queue; doubles up to `poll_max`.
const MIN_IDLE: Duration = Duration::from_millis(10);

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Jobs completed.
    pub completed: u64,
    /// Jobs failed (to retry, dead, or cancelled by their handler).
    pub failed: u64,
    /// Jobs snoozed or released (at shutdown).
    pub released: u64,
    /// Jobs whose lease was lost while they ran (nothing was reported for them).
    pub lost: u64,
}

#[derive(Clone)]
pub(crate) struct Inner {
    pub client: Arc<Client>,
    pub queues: Vec<(QueueName, usize)>,
    pub handlers: HashMap<String, ErasedHandler>,
    pub fallback: Option<ErasedHandler>,
    pub kinds: Vec<Kind>,
    pub periodic: Vec<PeriodicJob>,
    pub config: WorkerConfig,
}

/// A job in flight: its lease and how to stop it.
pub(crate) struct InFlight {
    pub job: JobRef,
    pub lease: Duration,
    pub stop: CancellationToken,
    pub reason: Arc<Mutex<Option<StopReason>>>,
}

/// Counters shared by the executors.
#[derive(Default)]
pub(crate) struct Counters {
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub released: AtomicU64,
    pub lost: AtomicU64,
}

pub(crate) type InFlightMap = Arc<Mutex<HashMap<i64, InFlight>>>;

pub(crate) async fn run(
    inner: Arc<Inner>,
    shutdown: CancellationToken,
    abort: CancellationToken,
) -> Result<RunReport> {
    let client = inner.client.clone();
    if let Err(e) = client.listen().await {
        tracing::warn!("wake-up channel unavailable, polling only: {e}");
    }
    let stop_fetching = shutdown.child_token();
    let inflight: InFlightMap = Arc::default();
    let counters = Arc::new(Counters::default());
    let completer = Completer::start(
        client.clone(),
        inner.config.complete_batch,
        counters.clone(),
    );
    let executors = TaskTracker::new();
    let background = CancellationToken::new();

    let hb = tokio::spawn(heartbeater(
        client.clone(),
        inflight.clone(),
        background.clone(),
    ));
    let maint = inner.config.maintenance.clone().map(|cfg| {
        tokio::spawn(super::maintenance::run(
            client.clone(),
            cfg,
            inner.periodic.clone(),
            inner.config.owner.clone(),
            background.clone(),
        ))
    });

    let mut fetchers = tokio::task::JoinSet::new();
    for (queue, concurrency) in &inner.queues {
        let slots = Arc::new(Semaphore::new(*concurrency));
        for _ in 0..inner.config.fetchers.clamp(1, (*concurrency).max(1)) {
            fetchers.spawn(fetch_loop(
                inner.clone(),
                queue.clone(),
                slots.clone(),
                *concurrency,
                executors.clone(),
                inflight.clone(),
                completer.clone(),
                counters.clone(),
                stop_fetching.clone(),
            ));
        }
    }
    let mut result = Ok(());
    while let Some(r) = fetchers.join_next().await {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                // A fatal error in one fetcher stops the others too.
                stop_fetching.cancel();
                if result.is_ok() {
                    result = Err(e);
                }
            }
            Err(e) => {
                stop_fetching.cancel();
                tracing::error!("fetcher task failed: {e}");
            }
        }
    }

    // Stopping: let running jobs finish within the grace period, then stop and release them.
    executors.close();
    if !executors.is_empty() {
        tokio::select! {
            _ = executors.wait() => {}
            _ = async {
                tokio::select! {
                    _ = tokio::time::sleep(inner.config.grace) => {}
                    _ = abort.cancelled() => {}
                }
            } => {
                for f in inflight.lock().expect("lock").values() {
                    f.reason.lock().expect("lock").get_or_insert(StopReason::Shutdown);
                    f.stop.cancel();
                }
                executors.wait().await;
            }
        }
    }
    completer.close().await;
    background.cancel();
    let _ = hb.await;
    if let Some(m) = maint {
        let _ = m.await;
    }
    result?;
    Ok(RunReport {
        completed: counters.completed.load(Ordering::Relaxed),
        failed: counters.failed.load(Ordering::Relaxed),
        released: counters.released.load(Ordering::Relaxed),
        lost: counters.lost.load(Ordering::Relaxed),
    })
}

#[allow(clippy::too_many_arguments)]
async fn fetch_loop(
    inner: Arc<Inner>,
    queue: QueueName,
    slots: Arc<Semaphore>,
    concurrency: usize,
    executors: TaskTracker,
    inflight: InFlightMap,
    completer: Completer,
    counters: Arc<Counters>,
    stop: CancellationToken,
) -> Result<()> {
    let client = &inner.client;
    let notify = client.wakers().get(queue.as_str());
    let mut opts = ClaimOpts::new(queue.as_str())?
        .owner(inner.config.owner.clone())
        .kinds(inner.kinds.clone());
    if let Some(l) = inner.config.lease {
        opts = opts.lease(l);
    }
    let fetchers = inner.config.fetchers.clamp(1, concurrency.max(1));
    let max_claim = inner
        .config
        .claim_batch
        .unwrap_or(concurrency.div_ceil(fetchers))
        .clamp(1, concurrency.max(1));
    let mut idle = MIN_IDLE;
    loop {
        let first = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("semaphore open"),
            _ = stop.cancelled() => return Ok(()),
        };
        let mut permits = vec![first];
        while permits.len() < max_claim
            && let Ok(p) = slots.clone().try_acquire_owned()
        {
            permits.push(p);
        }
        // Slots come free in bursts (a batch completes together). When jobs are still in
        // flight, wait a moment for the rest of the burst rather than claim a handful now.
        if permits.len() < max_claim / 2 && slots.available_permits() + permits.len() < concurrency
        {
            let gather = tokio::time::sleep(GATHER);
            tokio::pin!(gather);
            while permits.len() < max_claim {
                tokio::select! {
                    p = slots.clone().acquire_owned() => permits.push(p.expect("semaphore open")),
                    _ = &mut gather => break,
                }
            }
        }
        // Register for wake-ups before looking, so none is missed in between.
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let claimed = match client
            .claim(&opts.clone().limit(permits.len() as u32))
            .await
        {
            Ok(c) => c,
            Err(e) if e.is_transient() => {
                tracing::warn!("claim from {queue} failed, retrying: {e}");
                vec![]
            }
            Err(e) => return Err(e),
        };
        if claimed.is_empty() {
            drop(permits);
            if let Some(mode) = inner.config.drain
                && drained(client, &queue, mode, &slots, &inner).await?
            {
                return Ok(());
            }
            let jitter = Duration::from_micros(rand::random_range(0..=idle.as_micros() as u64 / 4));
            tokio::select! {
                _ = &mut notified => idle = MIN_IDLE,
                _ = tokio::time::sleep(idle + jitter) => idle = (idle * 2).min(inner.config.poll_max.max(MIN_IDLE)),
                _ = stop.cancelled() => return Ok(()),
            }
            continue;
        }
        idle = MIN_IDLE;
        permits.truncate(claimed.len());
        // Read here, never while a handler holds a job transaction: on SQLite that transaction
        // holds the write lock, and a settings read queued behind a blocked writer would wait on it.
        let settings = client
            .queue_settings(&queue)
            .await
            .unwrap_or_else(|_| QueueSettings::defaults(queue.clone()));
        let lease = inner.config.lease.unwrap_or(settings.lease);
        let retention = settings.retention;
        for (job, permit) in claimed.into_iter().zip(permits) {
            let inner = inner.clone();
            let inflight = inflight.clone();
            let completer = completer.clone();
            let counters = counters.clone();
            executors.spawn(async move {
                execute::run(
                    &inner, job, lease, retention, &inflight, &completer, &counters,
                )
                .await;
                drop(permit);
            });
        }
    }
}

/// True when a draining fetcher may stop: nothing of its own in flight and nothing left.
async fn drained(
    client: &Client,
    queue: &QueueName,
    mode: DrainMode,
    slots: &Semaphore,
    inner: &Inner,
) -> Result<bool> {
    let own = inner
        .queues
        .iter()
        .find(|(q, _)| q == queue)
        .map(|(_, c)| *c)
        .unwrap_or(0);
    if slots.available_permits() < own {
        return Ok(false); // our own jobs are still running
    }
    let left = match mode {
        DrainMode::All => client.pending(std::slice::from_ref(queue)).await?,
        DrainMode::Due => {
            let stats = client.stats(Some(queue)).await?;
            stats.iter().map(|(_, s)| s.available + s.running).sum()
        }
    };
    Ok(left == 0)
}

/// Keeps the leases of in-flight jobs alive and stops jobs whose lease is lost or whose
/// cancellation was requested.
async fn heartbeater(client: Arc<Client>, inflight: InFlightMap, stop: CancellationToken) {
    let tick = Duration::from_millis(200);
    let mut last: HashMap<i64, tokio::time::Instant> = HashMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.cancelled() => return,
        }
        let due: Vec<(JobRef, Duration)> = {
            let map = inflight.lock().expect("lock");
            last.retain(|id, _| map.contains_key(id));
            map.values()
                .filter(|f| !f.stop.is_cancelled())
                .filter(|f| {
                    let at = last
                        .entry(f.job.id)
                        .or_insert_with(tokio::time::Instant::now);
                    at.elapsed() >= f.lease / 3
                })
                .map(|f| (f.job, f.lease))
                .collect()
        };
        for (job, lease) in due {
            let verdict = match client.heartbeat(job, lease).await {
                Ok(h) if h.cancel_requested => Some(StopReason::CancelRequested),
                Ok(_) => None,
                Err(Error::LeaseLost { .. }) => Some(StopReason::LeaseLost),
                Err(e) => {
                    tracing::warn!("heartbeat of job {} failed: {e}", job.id);
                    None
                }
            };
            last.insert(job.id, tokio::time::Instant::now());
            if let Some(reason) = verdict
                && let Some(f) = inflight.lock().expect("lock").get(&job.id)
            {
                f.reason.lock().expect("lock").get_or_insert(reason);
                f.stop.cancel();
            }
        }
    }
}
