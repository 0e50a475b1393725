//! Running jobs. The [`Executor`] starts the jobs a claim loop claimed: each one's handler is
//! called, and polled once, by the claim loop itself ([`Execution`]): a handler that ends there
//! (most no-op or quick jobs) costs no task, no timer and no heartbeat registration. One that
//! does not end at once is handed to a task of its own, with its timeout and stop signal. Then
//! its outcome is settled: a completion waits for the claim loop's next statement, anything else
//! is recorded on its own (`outcome`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use super::completer::Finished;
use super::context::{JobStop, StopReason};
use super::fetch::{Claimed, Dispatch, TxStarted};
use super::heartbeat::{InFlight, InFlightMap, Lease};
use super::metrics::Counters;
use super::outcome::{Ended, Report, unwrap};
use super::state::Inner;
use super::{BoxFuture, JobContext, Outcome};
use crate::{ClaimedJob, JobRef, TxClaim, TxFinish};

/// Starts claimed jobs: polled once by their claim loop while its `inline_budget` lasts, then
/// in tasks of their own, registered with the heartbeater.
#[derive(Clone)]
pub(crate) struct Executor {
    pub inner: Arc<Inner>,
    /// The jobs' tasks, which shutdown waits for.
    pub tasks: TaskTracker,
    /// The jobs running past their first poll, for the heartbeater.
    pub inflight: InFlightMap,
    pub counters: Arc<Counters>,
}

impl Dispatch for Executor {
    fn start(&self, claimed: Claimed, finished: &Arc<Finished>) {
        let Claimed {
            jobs,
            slots,
            lease,
            retention,
        } = claimed;
        let inner = &self.inner;
        // Each handler is polled once here, while this claim's time for that lasts: a job that
        // ends at once is done with no task of its own, and goes back with the next claim.
        let inline_since = std::time::Instant::now();
        for (job, slot) in jobs.into_iter().zip(slots) {
            let token = job.lease_token;
            let (exec, first) = Execution::first_poll(inner, job, inline_since, false);
            // What the job's task starts from: an outcome to record, or a handler to run on.
            let start = match first {
                Some(ended) => match exec.settle(ended) {
                    Settled::Complete(job) => {
                        finished.ended(token, Some(job), slot);
                        continue;
                    }
                    Settled::Report(report) => Later::Report(report),
                },
                None => Later::Running(exec),
            };
            self.run_on(start, token, slot, lease, retention, finished);
        }
    }

    async fn start_tx(
        &self,
        claim: Box<dyn TxClaim>,
        claimed: Claimed,
        finished: &Arc<Finished>,
    ) -> TxStarted {
        let Claimed {
            jobs,
            slots,
            lease,
            retention,
        } = claimed;
        let inner = &self.inner;
        // Every job of one claim has the claim's queue and lease token.
        let (queue, token) = match jobs.first() {
            Some(j) => (j.queue.clone(), j.lease_token),
            None => {
                return TxStarted {
                    slots,
                    ..TxStarted::default()
                };
            }
        };
        let claimed = jobs.len();
        let mut finish = TxFinish::new(0, retention);
        // Jobs that ended in their first poll, completed in the claim's transaction, and the
        // others, leased in it, with what each goes on with after the commit. A job starts only
        // with a free slot: one whose job ended at once is free again for the next job, and
        // the jobs left when none is free are left alone (neither completed nor leased).
        let (mut done, mut later, mut free) = (vec![], vec![], slots);
        // When each started job was due: they count as started once the claim commits (the
        // jobs left alone are counted by the claim that starts them).
        let mut due = Vec::with_capacity(claimed);
        let inline_since = std::time::Instant::now();
        for job in jobs {
            let Some(slot) = free.pop() else {
                break;
            };
            let id = job.id;
            due.push(job.run_at.max(job.created_at));
            // A job of an ordered group completes as any leased job, with its group's hand-off.
            let grouped = job.group.is_some();
            let (exec, first) = Execution::first_poll(inner, job, inline_since, true);
            let start = match first {
                Some(ended) => match exec.settle(ended) {
                    Settled::Complete(job) if !grouped => {
                        finish.completed.push(id);
                        done.push(job);
                        free.push(slot);
                        continue;
                    }
                    Settled::Complete(job) => Later::Finished(job),
                    Settled::Report(report) => Later::Report(report),
                },
                None => Later::Running(exec),
            };
            finish.leased.push(id);
            later.push((start, slot));
        }
        let left = claimed - done.len() - later.len();
        finish.now = inner.client.now();
        if done.len() + left > 0 {
            finished.settled(token, done.len() + left);
        }
        match inner.client.finish_tx(&queue, claim, finish).await {
            Ok(()) => {
                inner.client.record_starts(&queue, due.into_iter());
                let refs: Vec<JobRef> = done.iter().map(ClaimedJob::job_ref).collect();
                super::completer::record(&self.counters, &done, &refs);
                let running = later.len();
                for (start, slot) in later {
                    self.run_on(start, token, slot, lease, retention, finished);
                }
                TxStarted {
                    slots: free,
                    ended: done.len(),
                    running,
                    left,
                }
            }
            Err(e) => {
                // Nothing was committed: every job is free again, as if never claimed (the
                // handlers still running are dropped, so that none runs beside its next claim).
                tracing::warn!(
                    "a transaction claim of {claimed} job(s) from {queue} did not commit; they run again: {e}",
                );
                if !later.is_empty() {
                    finished.settled(token, later.len());
                }
                free.extend(later.into_iter().map(|(start, slot)| {
                    drop(start);
                    slot
                }));
                TxStarted {
                    slots: free,
                    ended: 0,
                    running: 0,
                    left: claimed,
                }
            }
        }
    }
}

/// What a claimed job goes on with after its first poll, if it did not complete there.
enum Later {
    /// Its handler, to run on in a task of its own.
    Running(Execution),
    /// Its outcome, to record.
    Report(Report),
    /// It completed, and its completion goes with the claim loop's next claim.
    Finished(ClaimedJob),
}

impl Executor {
    /// Runs a job on in a task of its own: its handler (registered with the heartbeater while
    /// it runs) or the recording of its outcome; it ends in `finished`, with its slot.
    fn run_on(
        &self,
        start: Later,
        token: i64,
        slot: tokio::sync::OwnedSemaphorePermit,
        lease: Lease,
        retention: crate::Retention,
        finished: &Arc<Finished>,
    ) {
        let start = match start {
            Later::Finished(job) => return finished.ended(token, Some(job), slot),
            Later::Report(report) => Err(report),
            Later::Running(exec) => {
                // Its lease is written (a transaction claim's has committed by now).
                exec.stop().lease_written();
                let job_ref = exec.job_ref();
                self.inflight.lock().expect("lock").insert(
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
        let (inner, counters) = (self.inner.clone(), self.counters.clone());
        let (inflight, finished) = (self.inflight.clone(), finished.clone());
        self.tasks.spawn(async move {
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

/// A claimed job whose handler has been called.
pub(crate) struct Execution {
    job: Arc<ClaimedJob>,
    stop: Arc<JobStop>,
    /// The handler's future; `None` once it ended, or when there was none to run.
    fut: Option<BoxFuture>,
    /// How it ended without a future (no handler for its kind, or a handler that panicked when
    /// called).
    early: Option<Ended>,
    /// When the job's time is up, if the worker has a job timeout.
    deadline: Option<(Instant, Duration)>,
    /// The span the handler runs in (`backlog.job`, continuing the job's trace).
    span: tracing::Span,
}

/// What is left to do for a job whose handler has ended.
pub(crate) enum Settled {
    /// It completed: the job goes to its claim loop, for its next statement.
    Complete(ClaimedJob),
    /// Its outcome needs a statement of its own.
    Report(Report),
}

impl Execution {
    /// Calls the job's handler (the one for its kind, or the fallback), which starts nothing
    /// until polled.
    pub fn new(inner: &Inner, job: ClaimedJob, timeout: Option<Duration>) -> Self {
        let handler = job
            .kind
            .as_deref()
            .and_then(|k| inner.handlers.get(k))
            .or(inner.fallback.as_ref());
        let call = handler.map(|handler| {
            |job: Arc<ClaimedJob>, stop: Arc<JobStop>| {
                handler(JobContext {
                    job,
                    client: inner.client.clone(),
                    stop,
                    inline: false,
                })
            }
        });
        Self::start(job, timeout, call)
    }

    /// Calls the job's handler and, while the claim's inline budget (counted from `since`)
    /// lasts, polls it once: how it ended, if it did there.
    /// `in_tx`: the job was claimed in a transaction that writes its lease only at its commit.
    fn first_poll(
        inner: &Inner,
        job: ClaimedJob,
        since: std::time::Instant,
        in_tx: bool,
    ) -> (Self, Option<Ended>) {
        let mut exec = Execution::new(inner, job, inner.config.job_timeout);
        if in_tx {
            exec.stop().hold_lease();
        }
        let first = match since.elapsed() < inner.config.inline_budget {
            true => exec.poll_once(),
            false => None,
        };
        (exec, first)
    }

    /// Calls `call`, the job's handler given the job and its stop signal (`None`: there is no
    /// handler for the job's kind), in the job's span.
    pub fn start<F>(job: ClaimedJob, timeout: Option<Duration>, call: Option<F>) -> Self
    where
        F: FnOnce(Arc<ClaimedJob>, Arc<JobStop>) -> BoxFuture,
    {
        let job = Arc::new(job);
        let stop = Arc::new(JobStop::default());
        let deadline = timeout.map(|d| (Instant::now() + d, d));
        let span = crate::trace::job_span(&job);
        let (fut, early) = match call {
            None => {
                let msg = format!(
                    "no handler for kind {:?} in this worker",
                    job.kind.as_deref().unwrap_or("")
                );
                (None, Some(Ended::Handler(Err(msg.into()))))
            }
            Some(call) => {
                let (job, stop) = (job.clone(), stop.clone());
                let _in_span = span.enter();
                match std::panic::catch_unwind(AssertUnwindSafe(|| call(job, stop))) {
                    Ok(fut) => (Some(fut), None),
                    Err(p) => (None, Some(Ended::Panicked(panic_message(&p)))),
                }
            }
        };
        Execution {
            job,
            stop,
            fut,
            early,
            deadline,
            span,
        }
    }

    /// The job's id and lease token.
    pub fn job_ref(&self) -> JobRef {
        self.job.job_ref()
    }

    /// The job's stop signal.
    pub fn stop(&self) -> &Arc<JobStop> {
        &self.stop
    }

    /// Polls the handler once, right here: how it ended, if it did. A handler that is not done
    /// yet has registered nothing that counts (the waker is a no-op), and is polled again, with
    /// its task's waker, by [`Execution::run`].
    pub fn poll_once(&mut self) -> Option<Ended> {
        if let Some(ended) = self.early.take() {
            return Some(ended);
        }
        let fut = self.fut.as_mut()?;
        let _in_span = self.span.enter();
        let mut cx = Context::from_waker(Waker::noop());
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))) {
            Ok(Poll::Pending) => None,
            Ok(Poll::Ready(r)) => {
                self.fut = None;
                Some(Ended::Handler(r))
            }
            Err(p) => {
                self.fut = None;
                Some(Ended::Panicked(panic_message(&p)))
            }
        }
    }

    /// Runs the handler to its end, unless its stop signal or its timeout comes first.
    pub async fn run(&mut self) -> Ended {
        if let Some(ended) = self.early.take() {
            return ended;
        }
        let Some(fut) = self.fut.as_mut() else {
            return Ended::Handler(Err("the handler was polled after it ended".into()));
        };
        // The timer is boxed, and made only when there is a timeout: the executor's future is
        // moved into its task at each spawn, and stays small.
        let timer = self
            .deadline
            .map(|(at, _)| Box::pin(tokio::time::sleep_until(at)));
        let ended = tokio::select! {
            r = AssertUnwindSafe(fut.instrument(self.span.clone())).catch_unwind() => match r {
                Ok(r) => Ended::Handler(r),
                Err(p) => Ended::Panicked(panic_message(&p)),
            },
            _ = self.stop.stopped() => {
                Ended::Stopped(self.stop.reason().unwrap_or(StopReason::Shutdown))
            }
            _ = expiry(timer) => Ended::TimedOut(self.deadline.map(|(_, d)| d).unwrap_or_default()),
        };
        self.fut = None;
        ended
    }

    /// Ends the job's stop signal and sorts out what its end needs. A handler that fails
    /// because it was stopped on request is cancelled, not retried.
    pub fn settle(self, ended: Ended) -> Settled {
        let Execution { job, stop, fut, .. } = self;
        // The handler's context goes with its future: the job is unwrapped below, not copied.
        drop(fut);
        let requested = stop.reason() == Some(StopReason::CancelRequested);
        stop.end();
        let ended = match ended {
            Ended::Handler(Err(_) | Ok(Outcome::Retry { .. })) | Ended::TimedOut(_)
                if requested =>
            {
                Ended::Stopped(StopReason::CancelRequested)
            }
            other => other,
        };
        match ended {
            Ended::Handler(Ok(Outcome::Complete)) => Settled::Complete(unwrap(job)),
            ended => Settled::Report(Report::new(job, ended)),
        }
    }
}

/// Ends when the timer does; never without one.
async fn expiry(timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>) {
    match timer {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;
    use crate::worker::fakes::job;
    use crate::{HandlerResult, Outcome};

    /// An execution of job 1 whose handler is `fut`.
    fn execution(
        fut: impl Future<Output = HandlerResult> + Send + 'static,
        timeout: Option<Duration>,
    ) -> Execution {
        let call = |_, _| Box::pin(fut) as BoxFuture;
        Execution::start(job(1, 1), timeout, Some(call))
    }

    /// How a settled job ended, as it reads: `Complete` or its report's `Ended`.
    fn settled(exec: Execution, ended: Ended) -> String {
        match exec.settle(ended) {
            Settled::Complete(job) => format!("Complete({})", job.id),
            Settled::Report(r) => format!("{:?}", r.ended()),
        }
    }

    async fn forever() -> HandlerResult {
        std::future::pending().await
    }

    #[test]
    fn a_handler_that_ends_in_its_first_poll_is_settled_at_once() {
        let mut exec = execution(async { Ok(Outcome::Complete) }, None);
        let ended = exec.poll_once().expect("ended in its first poll");
        assert_eq!(settled(exec, ended), "Complete(1)");
        let mut failing = execution(async { Err("bad input".into()) }, None);
        let ended = failing.poll_once().unwrap();
        assert_eq!(settled(failing, ended), r#"Handler(Err("bad input"))"#);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_that_awaits_runs_on_to_its_end() {
        let handler = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(Outcome::Snooze(Duration::from_secs(1)))
        };
        let mut exec = execution(handler, Some(Duration::from_secs(10)));
        assert!(exec.poll_once().is_none());
        let ended = exec.run().await;
        assert_eq!(settled(exec, ended), "Handler(Ok(Snooze(1s)))");
    }

    #[test]
    fn a_job_of_a_kind_without_a_handler_fails() {
        let mut exec = Execution::start(job(1, 1), None, None::<fn(_, _) -> BoxFuture>);
        let ended = exec.poll_once().unwrap();
        assert_eq!(
            settled(exec, ended),
            r#"Handler(Err("no handler for kind \"k\" in this worker"))"#
        );
    }

    #[tokio::test]
    async fn a_panic_is_caught_when_called_at_its_first_poll_and_later() {
        let call = |_, _| -> BoxFuture { panic!("at the call") };
        let mut exec = Execution::start(job(1, 1), None, Some(call));
        let ended = exec.poll_once().unwrap();
        assert_eq!(settled(exec, ended), r#"Panicked("at the call")"#);
        let mut exec = execution(async { panic!("at once") }, None);
        let ended = exec.poll_once().unwrap();
        assert_eq!(settled(exec, ended), r#"Panicked("at once")"#);
        let later = async {
            tokio::task::yield_now().await;
            panic!("after an await {}", 1)
        };
        let mut exec = execution(later, None);
        assert!(exec.poll_once().is_none());
        let ended = exec.run().await;
        assert_eq!(settled(exec, ended), r#"Panicked("after an await 1")"#);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_is_stopped_at_its_timeout_counted_from_its_call() {
        let started = Instant::now();
        let mut exec = execution(forever(), Some(Duration::from_secs(2)));
        assert!(exec.poll_once().is_none());
        tokio::time::advance(Duration::from_millis(500)).await;
        let ended = exec.run().await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(settled(exec, ended), "TimedOut(2s)");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_signal_ends_the_run_with_its_reason() {
        for reason in [
            StopReason::CancelRequested,
            StopReason::LeaseLost,
            StopReason::Shutdown,
        ] {
            let mut exec = execution(forever(), None);
            let stop = exec.stop().clone();
            let run = tokio::spawn(async move {
                let ended = exec.run().await;
                settled(exec, ended)
            });
            tokio::time::sleep(Duration::from_secs(60)).await;
            assert!(!run.is_finished());
            stop.stop(reason);
            stop.stop(StopReason::Shutdown); // the first reason given wins
            assert_eq!(run.await.unwrap(), format!("Stopped({reason:?})"));
        }
    }

    #[test]
    fn a_failure_after_a_cancel_request_cancels_the_job() {
        let ends: [fn() -> Ended; 4] = [
            || Ended::Handler(Err("interrupted".into())),
            || Ended::Handler(Ok(Outcome::retry("interrupted"))),
            || Ended::TimedOut(Duration::from_secs(1)),
            || Ended::Handler(Ok(Outcome::Complete)),
        ];
        let settle_after = |reason, ended: fn() -> Ended| {
            let exec = execution(forever(), None);
            exec.stop().stop(reason);
            settled(exec, ended())
        };
        let cancelled = "Stopped(CancelRequested)";
        let after_cancel: Vec<_> = ends
            .iter()
            .map(|e| settle_after(StopReason::CancelRequested, *e))
            .collect();
        assert_eq!(
            after_cancel,
            [cancelled, cancelled, cancelled, "Complete(1)"]
        );
        let after_lease_lost = settle_after(StopReason::LeaseLost, ends[0]);
        assert_eq!(after_lease_lost, r#"Handler(Err("interrupted"))"#);
    }

    #[test]
    fn settling_stops_what_the_handler_left_waiting() {
        let exec = execution(async { Ok(Outcome::Complete) }, None);
        let stop = exec.stop().clone();
        assert!(!stop.is_stopped());
        let _ = exec.settle(Ended::Handler(Ok(Outcome::Complete)));
        assert!(stop.is_stopped());
        assert_eq!(stop.reason(), None, "ended, not stopped for a reason");
    }
}
