//! What a job's end does to its row. The decision ([`verdict`]) is a pure function of how the
//! handler ended; recording it ([`Report::record`]) goes through [`Reporter`], the few calls it
//! makes, which the [`Client`] implements and tests replace. A plain completion is not recorded
//! here: it waits for its claim loop's next statement (see `completer`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Outcome;
use super::context::StopReason;
use super::metrics::Counters;
use crate::{ClaimedJob, Client, Error, FailOutcome, JobRef, JobTx, Result, Retention};
use backlog_core::JobCompleteParams;

/// What is to be done with a job whose handler has ended.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// It completes with its claim loop's next statement.
    Complete,
    /// Its result is stored, then it completes with its claim loop's next statement.
    CompleteWith(serde_json::Value),
    /// It completes in the handler's transaction.
    CompleteInTx(JobTx),
    /// A failed attempt: retried after the given delay or else the queue's backoff, or dead when
    /// out of attempts (the job's own limit, or else its queue's).
    Fail(String, Option<Duration>),
    /// A failed attempt whose outcome is decided already.
    FailWith(String, FailOutcome),
    /// Back to available after this long, not counting the attempt (snooze, shutdown).
    Release(Duration),
    /// Its lease was taken over: nothing is recorded.
    LeaseLost,
}

/// How a job's handler ended.
#[derive(Debug)]
pub(crate) enum Ended {
    Handler(super::HandlerResult),
    Panicked(String),
    TimedOut(Duration),
    Stopped(StopReason),
}

/// What `ended` means. Whether a failed attempt is the job's last, and when a retry runs, are
/// [`Client::fail`]'s to decide: it knows the queue's limit and backoff, and the client's clock.
pub(crate) fn verdict(ended: Ended) -> Verdict {
    match ended {
        Ended::Handler(Ok(Outcome::Complete)) => Verdict::Complete,
        Ended::Handler(Ok(Outcome::CompleteWith(value))) => Verdict::CompleteWith(value),
        Ended::Handler(Ok(Outcome::CompleteInTx(tx))) => Verdict::CompleteInTx(tx),
        Ended::Handler(Ok(Outcome::Retry { error, after })) => Verdict::Fail(error, after),
        Ended::Handler(Ok(Outcome::Snooze(d))) => Verdict::Release(d),
        Ended::Handler(Ok(Outcome::Discard(why))) => Verdict::FailWith(why, FailOutcome::Dead),
        Ended::Handler(Ok(Outcome::Cancel(why))) => Verdict::FailWith(why, FailOutcome::Cancelled),
        Ended::Handler(Err(e)) => Verdict::Fail(e.to_string(), None),
        Ended::Panicked(msg) => Verdict::Fail(format!("handler panicked: {msg}"), None),
        Ended::TimedOut(d) => Verdict::Fail(
            format!("timed out after {}", crate::format_duration(d)),
            None,
        ),
        Ended::Stopped(StopReason::CancelRequested) => {
            Verdict::FailWith("cancelled on request".into(), FailOutcome::Cancelled)
        }
        Ended::Stopped(StopReason::LeaseLost) => Verdict::LeaseLost,
        Ended::Stopped(StopReason::Shutdown) => Verdict::Release(Duration::ZERO),
    }
}

/// The statements that record a job's end ([`Client`]'s, each fenced by the lease token).
pub(crate) trait Reporter: Send + Sync {
    /// Stores a result value on the running job.
    fn store_result(
        &self,
        job: JobRef,
        value: &serde_json::Value,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Completes the job in the handler's transaction, and commits.
    fn complete_in_tx(
        &self,
        tx: JobTx,
        job: &ClaimedJob,
        retention: Retention,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Records a failed attempt: retry after `after` (or the queue's backoff), or dead.
    fn fail(
        &self,
        job: &ClaimedJob,
        error: &str,
        after: Option<Duration>,
    ) -> impl Future<Output = Result<FailOutcome>> + Send;
    /// Records a failed attempt with its outcome.
    fn fail_with(
        &self,
        job: &ClaimedJob,
        error: &str,
        outcome: FailOutcome,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Makes the job available again after `delay`.
    fn release(&self, job: &ClaimedJob, delay: Duration)
    -> impl Future<Output = Result<()>> + Send;
}

impl Reporter for Client {
    fn store_result(
        &self,
        job: JobRef,
        value: &serde_json::Value,
    ) -> impl Future<Output = Result<()>> + Send {
        self.set_result(job, value)
    }

    async fn complete_in_tx(
        &self,
        tx: JobTx,
        job: &ClaimedJob,
        retention: Retention,
    ) -> Result<()> {
        tx.complete(JobCompleteParams {
            jobs: vec![job.job_ref()],
            now: self.now(),
            retention,
        })
        .await?;
        self.record(&job.queue, self.now(), |c| c.completed += 1);
        Ok(())
    }

    fn fail(
        &self,
        job: &ClaimedJob,
        error: &str,
        after: Option<Duration>,
    ) -> impl Future<Output = Result<FailOutcome>> + Send {
        Client::fail_retry(self, job, error, after)
    }

    fn fail_with(
        &self,
        job: &ClaimedJob,
        error: &str,
        outcome: FailOutcome,
    ) -> impl Future<Output = Result<()>> + Send {
        Client::fail_with(self, job, error, outcome)
    }

    fn release(
        &self,
        job: &ClaimedJob,
        delay: Duration,
    ) -> impl Future<Output = Result<()>> + Send {
        Client::release(self, job, delay)
    }
}

/// A job whose outcome is to be recorded by a statement of its own.
pub(crate) struct Report {
    job: Arc<ClaimedJob>,
    ended: Ended,
}

impl Report {
    pub fn new(job: Arc<ClaimedJob>, ended: Ended) -> Self {
        Report { job, ended }
    }

    /// How the handler ended.
    #[cfg(test)]
    pub fn ended(&self) -> &Ended {
        &self.ended
    }

    /// Records the outcome; returns the job when it is still to be completed with its claim
    /// loop's next statement (a result value was stored first).
    pub async fn record<R: Reporter>(
        self,
        reporter: &R,
        retention: Retention,
        counters: &Counters,
    ) -> Option<ClaimedJob> {
        let verdict = verdict(self.ended);
        let complete = apply(reporter, &self.job, verdict, retention, counters).await;
        complete.then(|| unwrap(self.job))
    }
}

/// The job, without a copy when nothing else holds it any more.
pub(crate) fn unwrap(job: Arc<ClaimedJob>) -> ClaimedJob {
    Arc::try_unwrap(job).unwrap_or_else(|shared| (*shared).clone())
}

/// Records `verdict` and counts it; true when the job is to be completed with its claim loop's
/// next statement.
async fn apply<R: Reporter>(
    reporter: &R,
    job: &ClaimedJob,
    verdict: Verdict,
    retention: Retention,
    counters: &Counters,
) -> bool {
    let count = |n: &std::sync::atomic::AtomicU64| n.fetch_add(1, Ordering::Relaxed);
    let result = match verdict {
        Verdict::Complete => return true,
        Verdict::CompleteWith(value) => match reporter.store_result(job.job_ref(), &value).await {
            Ok(()) => return true,
            Err(e) => Err(e),
        },
        Verdict::CompleteInTx(tx) => {
            let r = reporter.complete_in_tx(tx, job, retention).await;
            if r.is_ok() {
                count(&counters.completed);
            }
            r
        }
        Verdict::Fail(error, after) => {
            count(&counters.failed);
            reporter.fail(job, &error, after).await.map(|_| ())
        }
        Verdict::FailWith(error, outcome) => {
            count(&counters.failed);
            reporter.fail_with(job, &error, outcome).await
        }
        Verdict::Release(delay) => {
            count(&counters.released);
            reporter.release(job, delay).await
        }
        Verdict::LeaseLost => Err(Error::LeaseLost { job_id: job.id }),
    };
    match result {
        Ok(()) => {}
        Err(Error::LeaseLost { .. }) => {
            count(&counters.lost);
            tracing::warn!(
                "job {} lost its lease; its outcome was not recorded",
                job.id
            );
        }
        Err(e) => tracing::error!("job {}: recording its outcome failed: {e}", job.id),
    }
    false
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::worker::fakes;

    /// What `ended` decides, as text.
    fn decided(ended: Ended) -> String {
        format!("{:?}", verdict(ended))
    }

    fn returned(outcome: Outcome) -> Ended {
        Ended::Handler(Ok(outcome))
    }

    #[test]
    fn each_way_a_handler_ends_has_its_verdict() {
        let secs = Duration::from_secs;
        assert_eq!(decided(returned(Outcome::Complete)), "Complete");
        assert_eq!(
            decided(returned(Outcome::CompleteWith(7.into()))),
            "CompleteWith(Number(7))"
        );
        assert_eq!(
            decided(returned(Outcome::retry("busy"))),
            r#"Fail("busy", None)"#,
            "the queue's backoff and attempts decide"
        );
        // Retry or dead is the client's to decide, with the queue's limit (`fail_outcome`).
        let (error, after) = ("busy".into(), Some(secs(10)));
        assert_eq!(
            decided(returned(Outcome::Retry { error, after })),
            r#"Fail("busy", Some(10s))"#
        );
        assert_eq!(decided(returned(Outcome::Snooze(secs(5)))), "Release(5s)");
        assert_eq!(
            decided(returned(Outcome::Discard("bad".into()))),
            r#"FailWith("bad", Dead)"#
        );
        assert_eq!(
            decided(returned(Outcome::Cancel("moot".into()))),
            r#"FailWith("moot", Cancelled)"#
        );
        assert_eq!(
            decided(Ended::Handler(Err("boom".into()))),
            r#"Fail("boom", None)"#
        );
        assert_eq!(
            decided(Ended::Panicked("oops".into())),
            r#"Fail("handler panicked: oops", None)"#
        );
        assert_eq!(
            decided(Ended::TimedOut(Duration::from_millis(1500))),
            r#"Fail("timed out after 1s 500ms", None)"#
        );
        assert_eq!(
            decided(Ended::Stopped(StopReason::CancelRequested)),
            r#"FailWith("cancelled on request", Cancelled)"#
        );
        assert_eq!(decided(Ended::Stopped(StopReason::LeaseLost)), "LeaseLost");
        assert_eq!(
            decided(Ended::Stopped(StopReason::Shutdown)),
            "Release(0ns)"
        );
    }

    /// Records each call; answers with `refuse` when set.
    #[derive(Default)]
    struct RecordingReporter {
        calls: Mutex<Vec<String>>,
        refuse: Option<fn(i64) -> Error>,
    }

    impl RecordingReporter {
        fn answer(&self, job_id: i64, call: String) -> Result<()> {
            self.calls.lock().unwrap().push(call);
            self.refuse.map_or(Ok(()), |e| Err(e(job_id)))
        }

        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl Reporter for RecordingReporter {
        async fn store_result(&self, job: JobRef, value: &serde_json::Value) -> Result<()> {
            self.answer(job.id, format!("store_result {value}"))
        }

        async fn complete_in_tx(&self, _: JobTx, job: &ClaimedJob, _: Retention) -> Result<()> {
            self.answer(job.id, "complete_in_tx".into())
        }

        async fn fail(
            &self,
            job: &ClaimedJob,
            error: &str,
            after: Option<Duration>,
        ) -> Result<FailOutcome> {
            let after = after.map_or(String::new(), |d| format!(" after {d:?}"));
            self.answer(job.id, format!("fail {error}{after}"))?;
            Ok(FailOutcome::Dead)
        }

        async fn fail_with(&self, job: &ClaimedJob, error: &str, o: FailOutcome) -> Result<()> {
            self.answer(job.id, format!("fail_with {error} {o:?}"))
        }

        async fn release(&self, job: &ClaimedJob, delay: Duration) -> Result<()> {
            self.answer(job.id, format!("release after {delay:?}"))
        }
    }

    fn lease_lost(job_id: i64) -> Error {
        Error::LeaseLost { job_id }
    }

    /// Records `ended` for job 1: the calls made, whether the job goes on to its completion,
    /// and the counts (completed, failed, released, lost).
    async fn record(reporter: &RecordingReporter, ended: Ended) -> (Vec<String>, bool, [u64; 4]) {
        let counters = Counters::default();
        let report = Report::new(Arc::new(fakes::job(1, 1)), ended);
        let left = report.record(reporter, Retention::Delete, &counters).await;
        let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let counts = [
            n(&counters.completed),
            n(&counters.failed),
            n(&counters.released),
            n(&counters.lost),
        ];
        (
            reporter.calls.lock().unwrap().drain(..).collect(),
            left.is_some(),
            counts,
        )
    }

    #[tokio::test]
    async fn each_verdict_is_recorded_by_one_call_and_counted() {
        let r = RecordingReporter::default();
        let error = Ended::Handler(Err("boom".into()));
        assert_eq!(
            record(&r, error).await,
            (vec!["fail boom".into()], false, [0, 1, 0, 0])
        );
        let value = returned(Outcome::CompleteWith(serde_json::json!({"n": 1})));
        assert_eq!(
            record(&r, value).await,
            (vec![r#"store_result {"n":1}"#.into()], true, [0, 0, 0, 0]),
            "completed with the next claim, counted then"
        );
        let shutdown = Ended::Stopped(StopReason::Shutdown);
        assert_eq!(
            record(&r, shutdown).await,
            (vec!["release after 0ns".into()], false, [0, 0, 1, 0])
        );
        let lost = Ended::Stopped(StopReason::LeaseLost);
        assert_eq!(record(&r, lost).await, (vec![], false, [0, 0, 0, 1]));
        assert!(r.calls().is_empty());
    }

    #[tokio::test]
    async fn a_retry_with_a_delay_goes_to_the_client_with_its_delay() {
        let r = RecordingReporter::default();
        let retry = returned(Outcome::Retry {
            error: "later".into(),
            after: Some(Duration::from_secs(5)),
        });
        assert_eq!(record(&r, retry).await.0, ["fail later after 5s"]);
    }

    #[tokio::test]
    async fn an_outcome_refused_for_a_lost_lease_counts_as_lost() {
        let r = RecordingReporter {
            refuse: Some(lease_lost),
            ..Default::default()
        };
        let value = returned(Outcome::CompleteWith(1.into()));
        assert_eq!(
            record(&r, value).await,
            (vec!["store_result 1".into()], false, [0, 0, 0, 1]),
            "not completed either"
        );
        let discard = returned(Outcome::Discard("bad".into()));
        assert_eq!(record(&r, discard).await.2, [0, 1, 0, 1]);
        let broken = RecordingReporter {
            refuse: Some(|_| fakes::fatal()),
            ..Default::default()
        };
        let snooze = returned(Outcome::Snooze(Duration::from_secs(1)));
        assert_eq!(
            record(&broken, snooze).await,
            (vec!["release after 1s".into()], false, [0, 0, 1, 0]),
            "logged, not counted again"
        );
    }
}
