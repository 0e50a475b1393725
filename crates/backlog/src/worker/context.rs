//! What a handler gets (a [`JobContext`]) and what it returns (an [`Outcome`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{ClaimedJob, Client, JobTx, Result};

/// An error from a handler: the job is retried with backoff (or dead when out of attempts).
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// What a handler returns.
pub type HandlerResult = std::result::Result<Outcome, HandlerError>;

/// How a handler's job ends.
#[derive(Debug)]
pub enum Outcome {
    /// Done: the job completes (batched with other completions).
    Complete,
    /// Done, storing a result value on the job (kept or archived with it per the queue's
    /// retention; a producer waiting on the job sees it).
    CompleteWith(serde_json::Value),
    /// Done, in the handler's own transaction: the job completes in the same commit as the
    /// handler's writes, fenced by the lease token; if the lease was lost everything rolls back.
    CompleteInTx(JobTx),
    /// Failed: retry after the queue's backoff (or `after`), dead when attempts are exhausted.
    Retry {
        /// Why.
        error: String,
        /// Retry after this long instead of the backoff.
        after: Option<Duration>,
    },
    /// Run again after this long, not counting this attempt.
    Snooze(Duration),
    /// Give up: the job is dead at once, whatever attempts remain.
    Discard(String),
    /// The job ends cancelled.
    Cancel(String),
}

impl Outcome {
    /// A retry with the queue's backoff.
    pub fn retry(error: impl Into<String>) -> Self {
        Outcome::Retry {
            error: error.into(),
            after: None,
        }
    }
}

/// A running job as its handler sees it.
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) job: Arc<ClaimedJob>,
    pub(crate) client: Arc<Client>,
    pub(crate) stop: CancellationToken,
    pub(crate) inline: bool,
}

impl JobContext {
    /// The claimed job (id, queue, kind, payload, attempt, lease).
    pub fn job(&self) -> &ClaimedJob {
        &self.job
    }

    /// The job's id.
    pub fn id(&self) -> i64 {
        self.job.id
    }

    /// This attempt's number (1 for the first).
    pub fn attempt(&self) -> i32 {
        self.job.attempt
    }

    /// The client (to enqueue follow-up jobs, for example).
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// Resolves when the job should stop: cancellation requested, lease lost, timeout or
    /// shutdown. Handlers are also stopped by being dropped; this is for cooperative cleanup.
    pub async fn stopped(&self) {
        self.stop.cancelled().await
    }

    /// True once the job should stop.
    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Stores progress (any JSON) on the job, fenced by the lease.
    pub async fn progress<T: serde::Serialize + ?Sized>(&self, progress: &T) -> Result<()> {
        if self.inline {
            return Ok(());
        }
        self.client.progress(self.job.job_ref(), progress).await
    }

    /// Begins a transaction on the queue database for the handler's writes; return
    /// [`Outcome::CompleteInTx`] with it to complete the job in the same commit.
    pub async fn begin(&self) -> Result<JobTx> {
        self.client.begin().await
    }
}
