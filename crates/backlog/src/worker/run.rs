//! The run loop: claim loops (fetchers) per queue that complete what they claimed with their next
//! claim, the heartbeater, maintenance, shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::completer::{self, Finished};
use super::context::StopReason;
use super::execute::{Execution, Settled};
use super::heartbeat::{Heartbeater, InFlight, InFlightMap};
use super::{DrainMode, ErasedHandler, PeriodicJob, WorkerConfig};
use crate::{ClaimOpts, ClaimedJob, Client, Kind, QueueName, QueueSettings, Result};

/// Longest wait for the rest of a burst (the jobs of the same claims) before the next claim.
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
    /// Outcomes recorded, over every run of this worker.
    pub counters: Arc<Counters>,
    /// Claim round trips and their durations.
    pub claim_times: Arc<super::metrics::ClaimTimes>,
    /// The queues' slots of the current run.
    pub loads: Arc<super::metrics::Loads>,
}

/// Counters shared by the executors.
#[derive(Default)]
pub(crate) struct Counters {
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub released: AtomicU64,
    pub lost: AtomicU64,
}

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
    // The report is this run's share of the worker's counts.
    let counters = inner.counters.clone();
    let at_start = (
        counters.completed.load(Ordering::Relaxed),
        counters.failed.load(Ordering::Relaxed),
        counters.released.load(Ordering::Relaxed),
        counters.lost.load(Ordering::Relaxed),
    );
    let executors = TaskTracker::new();
    let background = CancellationToken::new();

    let hb =
        tokio::spawn(Heartbeater::new(client.clone(), inflight.clone()).run(background.clone()));
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
    let mut finished_lists = vec![];
    let mut loads = vec![];
    for (queue, concurrency) in &inner.queues {
        let slots = Arc::new(Semaphore::new(*concurrency));
        loads.push((queue.clone(), *concurrency, slots.clone()));
        let stopped = Arc::new(Notify::new());
        for _ in 0..inner.config.fetchers.clamp(1, (*concurrency).max(1)) {
            // Each fetcher completes the jobs it claimed, so a batch that finishes together goes
            // back whole with the next claim, as in a hand-written claim-and-complete loop.
            let finished = Arc::new(Finished::default());
            finished_lists.push(finished.clone());
            let fetch = fetch_loop(
                inner.clone(),
                queue.clone(),
                Queue {
                    slots: slots.clone(),
                    concurrency: *concurrency,
                    finished: finished.clone(),
                    stopped: stopped.clone(),
                },
                executors.clone(),
                inflight.clone(),
                counters.clone(),
                stop_fetching.clone(),
            );
            let stopped = stopped.clone();
            fetchers.spawn(async move {
                let r = fetch.await;
                stopped.notify_waiters();
                r
            });
        }
    }
    inner.loads.set(loads);
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
    // Fetchers no longer carry completions: jobs that finish meanwhile are completed on their own.
    let stop_flushing = CancellationToken::new();
    let flushers: Vec<_> = finished_lists
        .into_iter()
        .map(|f| {
            tokio::spawn(f.flush_until(
                client.clone(),
                inner.config.complete_batch.max(1),
                counters.clone(),
                stop_flushing.clone(),
            ))
        })
        .collect();
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
                    f.stop.stop(StopReason::Shutdown);
                }
                executors.wait().await;
            }
        }
    }
    stop_flushing.cancel();
    for f in flushers {
        let _ = f.await;
    }
    background.cancel();
    let _ = hb.await;
    if let Some(m) = maint {
        let _ = m.await;
    }
    // What this run counted goes to backlog_stat now, not at the next periodic flush: a worker
    // that drains and exits (or runs no maintenance) would otherwise leave it unwritten.
    if let Err(e) = client.flush_stats().await {
        tracing::warn!("could not write the run's counts to backlog_stat: {e}");
    }
    result?;
    Ok(RunReport {
        completed: counters.completed.load(Ordering::Relaxed) - at_start.0,
        failed: counters.failed.load(Ordering::Relaxed) - at_start.1,
        released: counters.released.load(Ordering::Relaxed) - at_start.2,
        lost: counters.lost.load(Ordering::Relaxed) - at_start.3,
    })
}

/// A queue as its fetchers share it.
struct Queue {
    /// Its concurrency slots: a job holds one from its claim until its outcome is recorded.
    slots: Arc<Semaphore>,
    concurrency: usize,
    /// This fetcher's finished jobs, whose completion goes with its next claim.
    finished: Arc<Finished>,
    /// Notified when a fetcher of the queue stops: a draining fetcher that found the queue empty
    /// while another one's jobs still ran looks again then (that one completed them first).
    stopped: Arc<Notify>,
}

/// A claim about to be made: the slots it fills, and the finished jobs it completes first (whose
/// slots are among `slots`).
#[derive(Default)]
struct Batch {
    slots: Vec<OwnedSemaphorePermit>,
    done: Vec<ClaimedJob>,
}

impl Batch {
    /// Takes the fetcher's finished jobs and as many free slots as are there, up to `max` slots
    /// (finished jobs are all taken, up to `complete_max`).
    fn fill(&mut self, q: &Queue, max: usize, complete_max: usize) {
        q.finished
            .take_into(complete_max, &mut self.done, &mut self.slots);
        while self.slots.len() < max
            && let Ok(p) = q.slots.clone().try_acquire_owned()
        {
            self.slots.push(p);
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn fetch_loop(
    inner: Arc<Inner>,
    queue: QueueName,
    q: Queue,
    executors: TaskTracker,
    inflight: InFlightMap,
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
    let concurrency = q.concurrency;
    let fetchers = inner.config.fetchers.clamp(1, concurrency.max(1));
    let max_claim = inner
        .config
        .claim_batch
        .unwrap_or(concurrency.div_ceil(fetchers).min(super::DEFAULT_CLAIM_MAX))
        .clamp(1, concurrency.max(1));
    let complete_max = inner.config.complete_batch.max(1);
    let mut idle = MIN_IDLE;
    loop {
        // Checked on every turn, not only while waiting: on a busy queue whose handlers end in
        // their first poll, slots come back before the next claim and the loop never waits.
        // Finished jobs not yet taken are completed by the flushers once every fetcher is done.
        if stop.is_cancelled() {
            return Ok(());
        }
        // Wait for a free slot or a finished job (whose slot comes with it).
        let mut batch = Batch::default();
        let finished = q.finished.notified();
        tokio::pin!(finished);
        finished.as_mut().enable();
        batch.fill(&q, max_claim, complete_max);
        if batch.slots.is_empty() {
            tokio::select! {
                p = q.slots.clone().acquire_owned() => batch.slots.push(p.expect("semaphore open")),
                _ = &mut finished => {}
                _ = stop.cancelled() => return Ok(()),
            }
            batch.fill(&q, max_claim, complete_max);
            if batch.slots.is_empty() {
                continue; // the other fetcher took them
            }
        }
        // Jobs end in bursts (a batch claimed together finishes together). While jobs of the
        // claims these finished jobs came from still run, wait a moment for the rest of the
        // burst, so that one statement completes them all and claims as many, rather than a
        // handful now; jobs of other claims, ending later, are not waited for.
        if batch.slots.len() < max_claim && q.finished.burst_running(&batch.done) {
            let gather = tokio::time::sleep(GATHER);
            tokio::pin!(gather);
            loop {
                let finished = q.finished.notified();
                tokio::pin!(finished);
                finished.as_mut().enable();
                if !q.finished.burst_running(&batch.done)
                    || batch.slots.len() + q.finished.waiting() >= max_claim
                {
                    break;
                }
                tokio::select! {
                    _ = &mut finished => {}
                    _ = &mut gather => break,
                }
            }
            batch.fill(&q, max_claim, complete_max);
        }
        // Register for wake-ups (new jobs, and jobs finishing while this claim runs) before
        // looking, so none is missed in between.
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let finished = q.finished.notified();
        tokio::pin!(finished);
        finished.as_mut().enable();
        let sibling_stopped = q.stopped.notified();
        tokio::pin!(sibling_stopped);
        sibling_stopped.as_mut().enable();
        let limit = batch.slots.len().min(max_claim) as u32;
        let claim_started = std::time::Instant::now();
        let result = client
            .complete_claim(&batch.done, &opts.clone().limit(limit))
            .await;
        inner.claim_times.record(claim_started.elapsed());
        let claimed = match result {
            Ok(r) => {
                completer::record(&counters, &batch.done, &r.completed);
                match r.claimed {
                    Ok(c) => c,
                    Err(e) if e.is_transient() => {
                        tracing::warn!("claim from {queue} failed, retrying: {e}");
                        vec![]
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => {
                // Nothing was committed: the finished jobs are completed on their own.
                completer::complete_alone(&**client, &batch.done, &counters).await;
                if !e.is_transient() {
                    return Err(e);
                }
                tracing::warn!("claim from {queue} failed, retrying: {e}");
                vec![]
            }
        };
        let mut slots = batch.slots;
        if claimed.is_empty() {
            drop(slots);
            if let Some(mode) = inner.config.drain
                && drained(client, &queue, mode, &q.slots, &inner).await?
            {
                return Ok(());
            }
            let jitter = Duration::from_micros(rand::random_range(0..=idle.as_micros() as u64 / 4));
            tokio::select! {
                _ = &mut notified => idle = MIN_IDLE,
                _ = &mut finished => {}
                _ = &mut sibling_stopped => {}
                _ = tokio::time::sleep(idle + jitter) => idle = (idle * 2).min(inner.config.poll_max.max(MIN_IDLE)),
                _ = stop.cancelled() => return Ok(()),
            }
            continue;
        }
        idle = MIN_IDLE;
        slots.truncate(claimed.len());
        // Read here, never while a handler holds a job transaction: on SQLite that transaction
        // holds the write lock, and a settings read queued behind a blocked writer would wait on it.
        let settings = client
            .queue_settings(&queue)
            .await
            .unwrap_or_else(|_| QueueSettings::defaults(queue.clone()));
        let lease = inner.config.lease.unwrap_or(settings.lease);
        let retention = settings.retention;
        q.finished.started(&claimed);
        // Each handler is polled once here, while this claim's time for that lasts: a job that
        // ends at once is done with no task of its own, and goes back with the next claim.
        let inline_since = Instant::now();
        for (job, slot) in claimed.into_iter().zip(slots) {
            let token = job.lease_token;
            let mut exec = Execution::new(&inner, job, inner.config.job_timeout);
            let first = match inline_since.elapsed() < inner.config.inline_budget {
                true => exec.poll_once(),
                false => None,
            };
            // What the job's task starts from: an outcome to record, or a handler to run on.
            let start = match first {
                Some(ended) => match exec.settle(ended) {
                    Settled::Complete(job) => {
                        q.finished.ended(token, Some(job), slot);
                        continue;
                    }
                    Settled::Report(report) => Err(report),
                },
                None => {
                    let job_ref = exec.job_ref();
                    inflight.lock().expect("lock").insert(
                        job_ref.id,
                        InFlight {
                            job: job_ref,
                            lease,
                            stop: exec.stop().clone(),
                        },
                    );
                    Ok(exec)
                }
            };
            let (inner, counters) = (inner.clone(), counters.clone());
            let (inflight, finished) = (inflight.clone(), q.finished.clone());
            executors.spawn(async move {
                let settled = match start {
                    Ok(mut exec) => {
                        let ended = exec.run().await;
                        inflight.lock().expect("lock").remove(&exec.job_ref().id);
                        exec.settle(ended)
                    }
                    Err(report) => Settled::Report(report),
                };
                // Outcomes other than a completion are recorded in a boxed future, so that the
                // executor's own stays small.
                let job = match settled {
                    Settled::Complete(job) => Some(job),
                    Settled::Report(r) => {
                        Box::pin(r.record(&*inner.client, retention, &counters)).await
                    }
                };
                finished.ended(token, job, slot);
            });
        }
    }
}

/// True when a draining fetcher may stop: nothing of its own in flight and nothing left that it
/// may take (jobs of kinds this worker does not claim wait for another worker).
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
        DrainMode::All => {
            client
                .pending(std::slice::from_ref(queue), &inner.kinds)
                .await?
        }
        DrainMode::Due => {
            client
                .pending_due(std::slice::from_ref(queue), &inner.kinds)
                .await?
        }
    };
    Ok(left == 0)
}
