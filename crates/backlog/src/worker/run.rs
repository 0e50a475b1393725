//! A run of a worker: the parts started and wired together (claim loops per queue sharing a
//! [`Pipeline`], the heartbeater, maintenance), then shutdown: claiming stops, running jobs get
//! their grace period, and what finished is completed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::completer::Finished;
use super::context::StopReason;
use super::execute::Executor;
use super::fetch::{self, Fetcher, Pipeline};
use super::heartbeat::{Heartbeater, InFlightMap};
use super::plan::{ClaimPlan, Claimers};
use super::state::Inner;
use crate::{Client, Result};

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

pub(crate) async fn run(
    inner: Arc<Inner>,
    shutdown: CancellationToken,
    abort: CancellationToken,
) -> Result<RunReport> {
    let client = inner.client.clone();
    // Leases and due times are read by the database's clock; the client measures its offset
    // again every minute as it reads the time.
    if let Err(e) = client.sync_clock().await {
        tracing::warn!("could not measure the database's clock, using this machine's: {e}");
    }
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
    let presence = tokio::spawn(super::presence::run(
        client.clone(),
        super::presence::registration(&inner.config.owner, &inner.queues, client.now()),
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

    let pipeline = Arc::new(Pipeline {
        claimer: client.clone(),
        dispatch: Executor {
            inner: inner.clone(),
            tasks: executors.clone(),
            inflight: inflight.clone(),
            counters: counters.clone(),
        },
        owner: inner.config.owner.clone(),
        kinds: inner.kinds.clone(),
        lease: inner.config.lease,
        drain: inner.config.drain,
        poll_max: inner.config.poll_max,
        tx_claims: inner.config.claim_in_transaction && {
            let caps = inner.client.backend().capabilities();
            caps.row_locks && caps.skip_locked && caps.bounded_tx_claims
        },
        counters: counters.clone(),
        claim_times: inner.claim_times.clone(),
        stop: stop_fetching.clone(),
    });
    let (mut fetchers, finished_lists) = spawn_fetchers(&inner, &pipeline);
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
    let _ = presence.await;
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

/// Spawns the claim loops of every queue, sharing `pipeline`; returns them with each one's
/// finished jobs.
fn spawn_fetchers(
    inner: &Inner,
    pipeline: &Arc<Pipeline<Client, Executor>>,
) -> (JoinSet<Result<()>>, Vec<Arc<Finished>>) {
    let mut fetchers = JoinSet::new();
    let mut finished_lists = vec![];
    let mut loads = vec![];
    let claimers = Claimers::of(&inner.client.backend().capabilities());
    for (queue, concurrency) in &inner.queues {
        let slots = Arc::new(Semaphore::new(*concurrency));
        loads.push((queue.clone(), *concurrency, slots.clone()));
        let stopped = Arc::new(Notify::new());
        let woken = inner.client.wakers().get(queue.as_str());
        let plan = ClaimPlan::new(*concurrency, &inner.config, claimers);
        for _ in 0..plan.fetchers {
            // Each fetcher completes the jobs it claimed, so a batch that finishes together goes
            // back whole with the next claim, as in a hand-written claim-and-complete loop.
            let finished = Arc::new(Finished::default());
            finished_lists.push(finished.clone());
            let queue = fetch::Queue {
                name: queue.clone(),
                slots: slots.clone(),
                finished,
                stopped: stopped.clone(),
                woken: woken.clone(),
            };
            let fetch = Fetcher::new(pipeline.clone(), queue, plan).run();
            let stopped = stopped.clone();
            fetchers.spawn(async move {
                let r = fetch.await;
                stopped.notify_waiters();
                r
            });
        }
    }
    inner.loads.set(loads);
    (fetchers, finished_lists)
}
