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
//!
//! Completing on its own goes through [`Completions`], which the [`Client`] implements and
//! tests replace.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use super::metrics::Counters;
use super::throttle::{LOG_EVERY, Throttled};
use crate::{ClaimedJob, Client, JobRef, Result};

/// Completing finished jobs without a claim ([`Client::complete_many`]).
pub(crate) trait Completions: Send + Sync + 'static {
    /// Completes `jobs`; returns the ones completed (the others had lost their lease).
    fn complete_many(
        &self,
        jobs: &[ClaimedJob],
    ) -> impl Future<Output = Result<Vec<JobRef>>> + Send;

    /// The database's time now, as leases are written ([`Client::now`]).
    fn now(&self) -> i64;
}

impl Completions for Client {
    fn complete_many(
        &self,
        jobs: &[ClaimedJob],
    ) -> impl Future<Output = Result<Vec<JobRef>>> + Send {
        Client::complete_many(self, jobs)
    }

    fn now(&self) -> i64 {
        Client::now(self)
    }
}

/// Tries of a completion that failed for a transient reason (connection lost, deadlock), at
/// least; more while the jobs' leases hold.
const COMPLETE_ATTEMPTS: u64 = 20;

/// The longest pause between two tries of a completion.
const COMPLETE_PAUSE_MAX: Duration = Duration::from_secs(1);

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

    /// `n` running jobs of the claim `token` ended and were recorded by the claim loop itself
    /// (completed in a transaction claim's commit), which keeps their slots for its next claim.
    pub fn settled(&self, token: i64, n: usize) {
        let last = {
            let mut running = self.running.lock().expect("lock");
            match running.get_mut(&token) {
                Some(left) if *left > n => {
                    *left -= n;
                    false
                }
                _ => {
                    running.remove(&token);
                    true
                }
            }
        };
        if last {
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
    pub async fn flush_until<C: Completions>(
        self: Arc<Self>,
        client: Arc<C>,
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
                complete_alone(&*client, &jobs, &counters).await;
                continue;
            }
            tokio::select! {
                _ = &mut woke => {}
                _ = stop.cancelled() => {
                    while self.take_into(batch, &mut jobs, &mut slots) > 0 {
                        complete_alone(&*client, &jobs, &counters).await;
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

/// Completes `jobs` without a claim. A transient failure is tried again after a pause 50 ms
/// longer each time (at most [`COMPLETE_PAUSE_MAX`]), [`COMPLETE_ATTEMPTS`] times and then for as
/// long as one of the jobs' leases holds: a database that cannot write for a while (a full
/// disk, a read-only file, a restart) and comes back within the lease gets the completions,
/// and the jobs do not run again. Past the leases the jobs are another claim's to run.
pub(crate) async fn complete_alone<C: Completions>(
    client: &C,
    jobs: &[ClaimedJob],
    counters: &Counters,
) {
    if jobs.is_empty() {
        return;
    }
    let leased_until = jobs.iter().map(|j| j.lease_expires_at).max().unwrap_or(0);
    let mut warnings = Throttled::new(LOG_EVERY);
    let mut attempt = 0;
    loop {
        match client.complete_many(jobs).await {
            Ok(done) => {
                if warnings.warned() {
                    tracing::info!("completed {} job(s) after {attempt} retries", jobs.len());
                }
                return record(counters, jobs, &done);
            }
            Err(e)
                if e.is_transient()
                    && (attempt < COMPLETE_ATTEMPTS || client.now() < leased_until) =>
            {
                attempt += 1;
                warnings.warn(format_args!(
                    "completing {} job(s) failed, retrying while their lease holds: {e}",
                    jobs.len()
                ));
                let pause = Duration::from_millis(50 * attempt).min(COMPLETE_PAUSE_MAX);
                tokio::time::sleep(pause).await;
            }
            Err(e) => {
                return tracing::error!("completing {} job(s) failed: {e}", jobs.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use futures::FutureExt as _;

    use super::*;
    use crate::Error;
    use crate::worker::fakes::{self, job};

    /// Completes what it is given, or fails as scripted; records each call's job ids.
    #[derive(Default)]
    struct ScriptedCompletions {
        script: Mutex<VecDeque<Result<()>>>,
        calls: Mutex<Vec<Vec<i64>>>,
        /// Jobs whose lease is gone: never completed.
        lost: Vec<i64>,
        /// When the first call came: the database's time is `fakes::T0` then, and moves
        /// with tokio's clock.
        start: std::sync::OnceLock<tokio::time::Instant>,
    }

    impl ScriptedCompletions {
        fn failing(errors: impl IntoIterator<Item = Error>) -> Self {
            ScriptedCompletions {
                script: Mutex::new(errors.into_iter().map(Err).collect()),
                ..Default::default()
            }
        }

        fn calls(&self) -> Vec<Vec<i64>> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl Completions for ScriptedCompletions {
        fn now(&self) -> i64 {
            let start = *self.start.get_or_init(tokio::time::Instant::now);
            fakes::T0 + start.elapsed().as_micros() as i64
        }

        async fn complete_many(&self, jobs: &[ClaimedJob]) -> Result<Vec<JobRef>> {
            self.calls
                .lock()
                .unwrap()
                .push(jobs.iter().map(|j| j.id).collect());
            self.script.lock().unwrap().pop_front().unwrap_or(Ok(()))?;
            Ok(jobs
                .iter()
                .filter(|j| !self.lost.contains(&j.id))
                .map(ClaimedJob::job_ref)
                .collect())
        }
    }

    fn counts(c: &Counters) -> (u64, u64) {
        (
            c.completed.load(Ordering::Relaxed),
            c.lost.load(Ordering::Relaxed),
        )
    }

    /// Whether `f`'s waiters, registered before `act`, were woken by it.
    fn wakes(f: &Finished, act: impl FnOnce()) -> bool {
        let woken = f.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        act();
        woken.now_or_never().is_some()
    }

    #[test]
    fn a_burst_wakes_its_claim_loop_at_its_first_and_last_job() {
        let f = Finished::default();
        let (sem, mut held) = fakes::slots(4);
        f.started(&[job(1, 7), job(2, 7), job(3, 7), job(4, 8)]);
        assert!(wakes(&f, || f.ended(
            7,
            Some(job(1, 7)),
            held.pop().unwrap()
        )));
        assert!(!wakes(&f, || f.ended(
            7,
            Some(job(2, 7)),
            held.pop().unwrap()
        )));
        assert!(wakes(&f, || f.ended(
            7,
            Some(job(3, 7)),
            held.pop().unwrap()
        )));
        assert_eq!(f.waiting(), 3);
        // A job whose outcome was recorded already gives its slot back at once, and says so.
        assert!(wakes(&f, || f.ended(8, None, held.pop().unwrap())));
        assert_eq!(sem.available_permits(), 1);
    }

    #[test]
    fn a_claim_takes_finished_jobs_with_their_slots_up_to_its_batch() {
        let f = Finished::default();
        let (sem, held) = fakes::slots(5);
        let claimed: Vec<_> = (1..=5).map(|id| job(id, 1)).collect();
        f.started(&claimed);
        for (j, slot) in claimed.into_iter().zip(held) {
            f.ended(1, Some(j), slot);
        }
        let (mut jobs, mut slots) = (vec![job(9, 2)], vec![]);
        assert_eq!(
            f.take_into(3, &mut jobs, &mut slots),
            2,
            "3 minus the one held"
        );
        assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [9, 1, 2]);
        assert_eq!((slots.len(), f.waiting()), (2, 3));
        drop(slots);
        assert_eq!(
            sem.available_permits(),
            2,
            "slots go back only when dropped"
        );
    }

    #[test]
    fn a_burst_runs_until_the_last_job_of_its_claim_ends() {
        let f = Finished::default();
        let (_sem, mut held) = fakes::slots(3);
        f.started(&[job(1, 7), job(2, 7), job(3, 8)]);
        f.ended(7, Some(job(1, 7)), held.pop().unwrap());
        assert!(f.burst_running(&[job(1, 7)]));
        f.ended(7, Some(job(2, 7)), held.pop().unwrap());
        assert!(!f.burst_running(&[job(1, 7), job(2, 7)]));
        assert!(
            f.burst_running(&[job(1, 7), job(3, 8)]),
            "claim 8 still runs"
        );
    }

    #[test]
    fn jobs_not_completed_count_as_lost() {
        let c = Counters::default();
        let jobs = [job(1, 1), job(2, 1), job(3, 1)];
        record(&c, &jobs, &[jobs[0].job_ref(), jobs[2].job_ref()]);
        assert_eq!(counts(&c), (2, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn completing_alone_retries_transient_failures_with_growing_pauses() {
        let done = ScriptedCompletions::failing([fakes::transient(), fakes::transient()]);
        let c = Counters::default();
        let started = tokio::time::Instant::now();
        complete_alone(&done, &[job(1, 1), job(2, 1)], &c).await;
        assert_eq!(done.calls().len(), 3);
        assert_eq!(started.elapsed(), Duration::from_millis(50 + 100));
        assert_eq!(counts(&c), (2, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn completing_alone_gives_up_on_a_lasting_or_fatal_failure() {
        let c = Counters::default();
        let flaky = ScriptedCompletions::failing((0..1000).map(|_| fakes::transient()));
        // The made-up jobs' leases end 30 s after fakes::T0, the fake database's time now.
        flaky.now();
        let started = tokio::time::Instant::now();
        complete_alone(&flaky, &[job(1, 1)], &c).await;
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(30) && waited < Duration::from_secs(32),
            "tried for {waited:?}, not as long as the lease"
        );
        // 20 tries in 10.5 s, then one a second until the lease ends.
        assert_eq!(flaky.calls().len(), 1 + COMPLETE_ATTEMPTS as usize + 20);
        let broken = ScriptedCompletions::failing([fakes::fatal()]);
        complete_alone(&broken, &[job(1, 1)], &c).await;
        assert_eq!(broken.calls().len(), 1);
        assert_eq!(counts(&c), (0, 0), "nothing was recorded");
        complete_alone(&broken, &[], &c).await;
        assert_eq!(broken.calls().len(), 1, "nothing to complete, no statement");
    }

    #[tokio::test(start_paused = true)]
    async fn after_fetching_stops_finished_jobs_complete_on_their_own_in_batches() {
        let f = Arc::new(Finished::default());
        let done = Arc::new(ScriptedCompletions {
            lost: vec![3],
            ..Default::default()
        });
        let counters = Arc::new(Counters::default());
        let stop = CancellationToken::new();
        let (_sem, mut held) = fakes::slots(5);
        let claimed: Vec<_> = (1..=5).map(|id| job(id, 1)).collect();
        f.started(&claimed);
        let mut claimed = claimed.into_iter();
        for _ in 0..3 {
            f.ended(1, claimed.next(), held.pop().unwrap());
        }
        let flusher =
            tokio::spawn(
                f.clone()
                    .flush_until(done.clone(), 2, counters.clone(), stop.clone()),
            );
        tokio::task::yield_now().await;
        assert_eq!(done.calls(), [vec![1, 2], vec![3]]);
        f.ended(1, claimed.next(), held.pop().unwrap());
        tokio::task::yield_now().await;
        assert_eq!(done.calls().len(), 3, "completed as it arrives");
        // One that ends as the flusher is told to stop is completed still.
        f.ended(1, claimed.next(), held.pop().unwrap());
        stop.cancel();
        flusher.await.unwrap();
        assert_eq!(done.calls(), [vec![1, 2], vec![3], vec![4], vec![5]]);
        assert_eq!(counts(&counters), (4, 1));
    }
}
