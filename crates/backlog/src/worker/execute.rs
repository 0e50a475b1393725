//! Running one job: its handler under a timeout and a stop token, then its outcome reported.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::run::{Counters, InFlight, InFlightMap, Inner};
use super::{JobContext, Outcome};
use crate::{ClaimedJob, Error, FailOutcome, Retention};
use backlog_core::JobCompleteParams;

/// Why a running job was stopped from outside its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// Someone asked for the job to be cancelled.
    CancelRequested,
    /// The lease was taken over: report nothing.
    LeaseLost,
    /// The worker is shutting down and the grace period is over: release the job.
    Shutdown,
}

enum Ended {
    Handler(super::HandlerResult),
    Panicked(String),
    TimedOut(Duration),
    Stopped(StopReason),
}

/// Runs the job and records its outcome; returns the job when it is to be completed in the
/// queue's next batch (its slot then stays taken until that completion commits).
pub(crate) async fn run(
    inner: &Inner,
    job: ClaimedJob,
    lease: Duration,
    retention: Retention,
    inflight: &InFlightMap,
    counters: &Counters,
) -> Option<ClaimedJob> {
    let client = &inner.client;
    let stop = CancellationToken::new();
    let reason = Arc::new(Mutex::new(None));
    inflight.lock().expect("lock").insert(
        job.id,
        InFlight {
            job: job.job_ref(),
            lease,
            stop: stop.clone(),
            reason: reason.clone(),
        },
    );
    let job = Arc::new(job);
    let handler = job
        .kind
        .as_deref()
        .and_then(|k| inner.handlers.get(k))
        .or(inner.fallback.as_ref())
        .cloned();
    let ended = match handler {
        None => Ended::Handler(Err(format!(
            "no handler for kind {:?} in this worker",
            job.kind.as_deref().unwrap_or("")
        )
        .into())),
        Some(handler) => {
            let ctx = JobContext {
                job: job.clone(),
                client: client.clone(),
                stop: stop.clone(),
                inline: false,
            };
            let fut = std::panic::AssertUnwindSafe(handler(ctx)).catch_unwind();
            // The timer is boxed, and made only when there is a timeout: the executor's future
            // is moved into its task at each spawn, and stays small.
            let timeout = inner.config.job_timeout;
            let timer = timeout.map(|d| Box::pin(tokio::time::sleep(d)));
            tokio::select! {
                r = fut => match r {
                    Ok(r) => Ended::Handler(r),
                    Err(p) => Ended::Panicked(panic_message(&p)),
                },
                _ = stop.cancelled() => {
                    Ended::Stopped(reason.lock().expect("lock").unwrap_or(StopReason::Shutdown))
                }
                _ = expiry(timer) => Ended::TimedOut(timeout.unwrap_or_default()),
            }
        }
    };
    inflight.lock().expect("lock").remove(&job.id);
    // A handler that fails because it was stopped on request is cancelled, not retried.
    let requested = *reason.lock().expect("lock") == Some(StopReason::CancelRequested);
    let ended = match ended {
        Ended::Handler(Err(_) | Ok(Outcome::Retry { .. })) | Ended::TimedOut(_) if requested => {
            Ended::Stopped(StopReason::CancelRequested)
        }
        other => other,
    };
    stop.cancel();
    // A completion needs no statement here (it goes with the next claim); every other outcome
    // does, and its future is boxed so that the executor's own stays small.
    let complete = match ended {
        Ended::Handler(Ok(Outcome::Complete)) => true,
        ended => Box::pin(report(inner, &job, ended, retention, counters)).await,
    };
    // The handler's context is gone with its future: the job is unwrapped, not copied.
    complete.then(|| Arc::try_unwrap(job).unwrap_or_else(|shared| (*shared).clone()))
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
        Ended::Handler(Ok(Outcome::Complete)) => return true, // (run takes it before)
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
