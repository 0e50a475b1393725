//! Running one job. Its handler is called, and polled once, by the claim loop that claimed it:
//! a handler that ends there (most no-op or quick jobs) costs no task, no timer and no heartbeat
//! registration. One that does not end at once is handed to a task of its own, with its timeout
//! and stop signal. Then its outcome is settled: a completion waits for the claim loop's next
//! statement, anything else is recorded on its own.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::context::{JobStop, StopReason};
use super::run::{Counters, Inner};
use super::{BoxFuture, JobContext, Outcome};
use crate::{ClaimedJob, Error, FailOutcome, JobRef, Retention};
use backlog_core::JobCompleteParams;

pub(crate) enum Ended {
    Handler(super::HandlerResult),
    Panicked(String),
    TimedOut(Duration),
    Stopped(StopReason),
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
        let job = Arc::new(job);
        let stop = Arc::new(JobStop::default());
        let deadline = timeout.map(|d| (Instant::now() + d, d));
        let span = crate::trace::job_span(&job);
        let handler = job
            .kind
            .as_deref()
            .and_then(|k| inner.handlers.get(k))
            .or(inner.fallback.as_ref());
        let (fut, early) = match handler {
            None => {
                let msg = format!(
                    "no handler for kind {:?} in this worker",
                    job.kind.as_deref().unwrap_or("")
                );
                (None, Some(Ended::Handler(Err(msg.into()))))
            }
            Some(handler) => {
                let ctx = JobContext {
                    job: job.clone(),
                    client: inner.client.clone(),
                    stop: stop.clone(),
                    inline: false,
                };
                let _in_span = span.enter();
                match std::panic::catch_unwind(AssertUnwindSafe(|| handler(ctx))) {
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
            ended => Settled::Report(Report { job, ended }),
        }
    }
}

/// A job whose outcome is to be recorded by a statement of its own.
pub(crate) struct Report {
    job: Arc<ClaimedJob>,
    ended: Ended,
}

impl Report {
    /// Records the outcome; returns the job when it is still to be completed with its claim
    /// loop's next statement (a result value was stored first).
    pub async fn record(
        self,
        inner: &Inner,
        retention: Retention,
        counters: &Counters,
    ) -> Option<ClaimedJob> {
        let complete = report(inner, &self.job, self.ended, retention, counters).await;
        complete.then(|| unwrap(self.job))
    }
}

fn unwrap(job: Arc<ClaimedJob>) -> ClaimedJob {
    Arc::try_unwrap(job).unwrap_or_else(|shared| (*shared).clone())
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

/// Records the outcome; true when the job is to be completed with its fetcher's next claim.
async fn report(
    inner: &Inner,
    job: &ClaimedJob,
    ended: Ended,
    retention: Retention,
    counters: &Counters,
) -> bool {
    let client = &inner.client;
    let failed = |n: &Counters| n.failed.fetch_add(1, Ordering::Relaxed);
    let result = match ended {
        Ended::Handler(Ok(Outcome::Complete)) => return true, // (settled before)
        Ended::Handler(Ok(Outcome::CompleteWith(value))) => {
            match client.set_result(job.job_ref(), &value).await {
                Ok(()) => return true,
                Err(e) => Err(e),
            }
        }
        Ended::Handler(Ok(Outcome::CompleteInTx(tx))) => {
            let r = tx
                .complete(JobCompleteParams {
                    jobs: vec![job.job_ref()],
                    now: client.now(),
                    retention,
                })
                .await;
            if r.is_ok() {
                counters.completed.fetch_add(1, Ordering::Relaxed);
                client.record(&job.queue, client.now(), |c| c.completed += 1);
            }
            r
        }
        Ended::Handler(Ok(Outcome::Retry { error, after })) => {
            failed(counters);
            match after {
                Some(d) => {
                    let at = client.now() + d.as_micros() as i64;
                    let max = job.max_attempts.unwrap_or(i32::MAX);
                    let outcome = if job.attempt >= max {
                        FailOutcome::Dead
                    } else {
                        FailOutcome::Retry { at }
                    };
                    client.fail_with(job, &error, outcome).await
                }
                None => client.fail(job, &error).await.map(|_| ()),
            }
        }
        Ended::Handler(Ok(Outcome::Snooze(d))) => {
            counters.released.fetch_add(1, Ordering::Relaxed);
            client.snooze(job, d).await
        }
        Ended::Handler(Ok(Outcome::Discard(why))) => {
            failed(counters);
            client.fail_with(job, &why, FailOutcome::Dead).await
        }
        Ended::Handler(Ok(Outcome::Cancel(why))) => {
            failed(counters);
            client.fail_with(job, &why, FailOutcome::Cancelled).await
        }
        Ended::Handler(Err(e)) => {
            failed(counters);
            client.fail(job, &e.to_string()).await.map(|_| ())
        }
        Ended::Panicked(msg) => {
            failed(counters);
            client
                .fail(job, &format!("handler panicked: {msg}"))
                .await
                .map(|_| ())
        }
        Ended::TimedOut(d) => {
            failed(counters);
            let msg = format!("timed out after {}", crate::format_duration(d));
            client.fail(job, &msg).await.map(|_| ())
        }
        Ended::Stopped(StopReason::CancelRequested) => {
            failed(counters);
            client
                .fail_with(job, "cancelled on request", FailOutcome::Cancelled)
                .await
        }
        Ended::Stopped(StopReason::LeaseLost) => Err(Error::LeaseLost { job_id: job.id }),
        Ended::Stopped(StopReason::Shutdown) => {
            counters.released.fetch_add(1, Ordering::Relaxed);
            client.release(job, Duration::ZERO).await
        }
    };
    match result {
        Ok(()) => {}
        Err(Error::LeaseLost { .. }) => {
            counters.lost.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "job {} lost its lease; its outcome was not recorded",
                job.id
            );
        }
        Err(e) => tracing::error!("job {}: recording its outcome failed: {e}", job.id),
    }
    false
}
