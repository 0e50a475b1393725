//! Completions, batched and carried by the next claim.
//!
//! An executor whose job finished hands the job, together with its concurrency slot, to the
//! [`Finished`] list of the fetcher that claimed it. That fetcher completes the list in the same statement or
//! transaction as its next claim ([`Client::complete_claim`]), and the slots pass to the jobs it
//! claims: a worker that drains a queue pays one round trip and one commit per batch, where a
//! claim and a separate completion would pay two. A slot is held until its job's completion
//! commits, so a process that dies leaves at most `concurrency` jobs per queue to run again: the
//! ones running and the ones finished but not yet recorded, together. Once fetching has stopped
//! (shutdown), [`Finished::flush_until`] completes what is left on its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use super::run::Counters;
use crate::{ClaimedJob, Client, JobRef};

/// Tries of a completion that failed for a transient reason (connection lost, deadlock).
const COMPLETE_ATTEMPTS: u64 = 20;

/// One fetcher's finished jobs waiting for their completion, each with its slot, and how many
/// jobs of each of its claims (by the claim's lease token, which all its jobs share) still run.
#[derive(Default)]
pub(crate) struct Finished {
    jobs: Mutex<Vec<(ClaimedJob, OwnedSemaphorePermit)>>,
    running: Mutex<HashMap<i64, usize>>,
    notify: Notify,
}

impl Finished {
    /// Counts claimed jobs as running, by their claim's lease token.
    pub fn started(&self, claimed: &[ClaimedJob]) {
        let mut running = self.running.lock().expect("lock");
        for job in claimed {
            *running.entry(job.lease_token).or_default() += 1;
        }
    }

    /// A running job of the claim `token` ended: with `Some(job)` it waits here, with its slot,
    /// to be completed; with `None` its outcome is recorded already and the slot is given back.
    ///
    /// Whoever waits is woken by the first job to wait here and by the last job of a claim to
    /// end, not by every job: a burst of fifty no-op jobs wakes its claim loop twice, not fifty
    /// times (each wake-up is a task switch, often to another thread, on a machine the database
    /// shares).
    pub fn ended(&self, token: i64, job: Option<ClaimedJob>, slot: OwnedSemaphorePermit) {
        let first = match job {
            Some(job) => {
                let mut jobs = self.jobs.lock().expect("lock");
                jobs.push((job, slot));
                jobs.len() == 1
            }
            None => {
                drop(slot);
                true // a free slot: the claim loop may be waiting for one
            }
        };
        let last = {
            let mut running = self.running.lock().expect("lock");
            match running.get_mut(&token) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                _ => {
                    running.remove(&token);
                    true
                }
            }
        };
        if first || last {
            self.notify.notify_waiters();
        }
    }

    /// Whether jobs of the claims these finished jobs came from are still running: jobs claimed
    /// together tend to end together (a burst), and a claim waits a moment for the rest.
    pub fn burst_running(&self, finished: &[ClaimedJob]) -> bool {
        let running = self.running.lock().expect("lock");
        finished
            .iter()
            .any(|j| running.contains_key(&j.lease_token))
    }

    /// How many finished jobs wait here.
    pub fn waiting(&self) -> usize {
        self.jobs.lock().expect("lock").len()
    }

    /// Moves up to `max` waiting jobs into `jobs` and their slots into `slots`; returns how many.
    pub fn take_into(
        &self,
        max: usize,
        jobs: &mut Vec<ClaimedJob>,
        slots: &mut Vec<OwnedSemaphorePermit>,
    ) -> usize {
        let mut list = self.jobs.lock().expect("lock");
        let n = list.len().min(max.saturating_sub(jobs.len()));
        for (job, slot) in list.drain(..n) {
            jobs.push(job);
            slots.push(slot);
        }
        n
    }

    /// Resolves at the next [`Finished::ended`]; `enable` it before looking at the list, so that
    /// a push in between is not missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    /// Completes finished jobs on their own, as they arrive, until `stop`; then once more.
    pub async fn flush_until(
        self: Arc<Self>,
        client: Arc<Client>,
        batch: usize,
        counters: Arc<Counters>,
        stop: CancellationToken,
    ) {
        loop {
            let woke = self.notified();
            tokio::pin!(woke);
            woke.as_mut().enable();
            let (mut jobs, mut slots) = (vec![], vec![]);
            if self.take_into(batch, &mut jobs, &mut slots) > 0 {
                complete_alone(&client, &jobs, &counters).await;
                continue;
            }
            tokio::select! {
                _ = &mut woke => {}
                _ = stop.cancelled() => {
                    while self.take_into(batch, &mut jobs, &mut slots) > 0 {
                        complete_alone(&client, &jobs, &counters).await;
                        jobs.clear();
                        slots.clear();
                    }
                    return;
                }
            }
        }
    }
}

/// Counts what a completion of `jobs` did, of which `completed` were recorded (the others had
/// lost their lease: nothing was changed for them).
pub(crate) fn record(counters: &Counters, jobs: &[ClaimedJob], completed: &[JobRef]) {
    counters
        .completed
        .fetch_add(completed.len() as u64, Ordering::Relaxed);
    let lost = jobs.len().saturating_sub(completed.len());
    if lost > 0 {
        counters.lost.fetch_add(lost as u64, Ordering::Relaxed);
        tracing::warn!("{lost} finished job(s) had lost their lease; not completed");
    }
}

/// Completes `jobs` without a claim, retrying transient failures.
pub(crate) async fn complete_alone(client: &Client, jobs: &[ClaimedJob], counters: &Counters) {
    if jobs.is_empty() {
        return;
    }
    let mut attempt = 0;
    loop {
        match client.complete_many(jobs).await {
            Ok(done) => return record(counters, jobs, &done),
            Err(e) if e.is_transient() && attempt < COMPLETE_ATTEMPTS => {
                attempt += 1;
                tracing::warn!("completing {} job(s) failed, retrying: {e}", jobs.len());
                tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
            }
            Err(e) => {
                return tracing::error!("completing {} job(s) failed: {e}", jobs.len());
            }
        }
    }
}
