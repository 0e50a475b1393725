//! What a handler gets (a [`JobContext`]) and what it returns (an [`Outcome`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

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
    pub(crate) stop: Arc<JobStop>,
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
    ///
    /// In transaction claim mode (the default on PostgreSQL and MySQL/MariaDB) the job's lease
    /// is written by the claim's commit, right after the handler's first poll. A statement about
    /// this job itself that the handler sends through the client before its first await returns
    /// can reach the server before that commit: it reads the row as last committed, without
    /// this attempt's lease token, and does not wait for the claim's row lock, so it finds no
    /// job holding the token ([`Error::LeaseLost`](crate::Error::LeaseLost)).
    /// [`JobContext::progress`] waits for the lease; before other writes to the job's own row
    /// ([`Client::set_result`], [`Client::heartbeat`]), await [`JobContext::leased`].
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// Resolves once this attempt's lease is in the database: at once for a job claimed under a
    /// lease (and in [`testing`](crate::testing)), after the claim's commit for one claimed in
    /// transaction claim mode. Await it before a statement about the job's own row sent
    /// through [`client`](Self::client), so that the statement finds this attempt's token.
    pub async fn leased(&self) {
        if !self.inline {
            self.stop.leased().await;
        }
    }

    /// Resolves when the job should stop: cancellation requested, lease lost, timeout or
    /// shutdown. Handlers are also stopped by being dropped; this is for cooperative cleanup.
    pub async fn stopped(&self) {
        self.stop.stopped().await
    }

    /// True once the job should stop.
    pub fn is_stopped(&self) -> bool {
        self.stop.is_stopped()
    }

    /// Stores progress (any JSON) on the job, fenced by the lease.
    pub async fn progress<T: serde::Serialize + ?Sized>(&self, progress: &T) -> Result<()> {
        if self.inline {
            return Ok(());
        }
        self.stop.leased().await;
        self.client.progress(self.job.job_ref(), progress).await
    }

    /// Begins a transaction on the queue database for the handler's writes; return
    /// [`Outcome::CompleteInTx`] with it to complete the job in the same commit.
    pub async fn begin(&self) -> Result<JobTx> {
        self.client.begin().await
    }
}

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

/// A job's stop signal, and why it was given: one allocation per job, shared by its context,
/// its executor and (while it runs past its first poll) the heartbeater. The first reason given
/// wins; a job whose handler has ended is stopped too, with no reason, so that anything it left
/// waiting on [`JobContext::stopped`] resolves.
#[derive(Debug, Default)]
pub(crate) struct JobStop {
    state: AtomicU8,
    notify: Notify,
    /// The job was claimed in a transaction that has not committed its lease yet: the job's
    /// row carries no lease token to fence a write with until then (`hold_lease`).
    lease_pending: std::sync::atomic::AtomicBool,
    lease_written: Notify,
}

const RUNNING: u8 = 0;
const ENDED: u8 = 4;

impl JobStop {
    /// Stops the job for `reason`, unless it is stopped already.
    pub fn stop(&self, reason: StopReason) {
        let code = match reason {
            StopReason::CancelRequested => 1,
            StopReason::LeaseLost => 2,
            StopReason::Shutdown => 3,
        };
        self.set(code);
    }

    /// Marks the job's handler as ended.
    pub fn end(&self) {
        self.set(ENDED);
    }

    fn set(&self, code: u8) {
        if self
            .state
            .compare_exchange(RUNNING, code, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.notify.notify_waiters();
        }
    }

    /// Why the job was stopped, if it was, before its handler ended.
    pub fn reason(&self) -> Option<StopReason> {
        match self.state.load(Ordering::Acquire) {
            1 => Some(StopReason::CancelRequested),
            2 => Some(StopReason::LeaseLost),
            3 => Some(StopReason::Shutdown),
            _ => None,
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.state.load(Ordering::Acquire) != RUNNING
    }

    /// The job's lease is not written yet (a transaction claim's first poll): the context's
    /// writes to the job's row wait for [`lease_written`](Self::lease_written). A write sent
    /// before the claim's commit would find the row without its lease token: an UPDATE at READ
    /// COMMITTED (PostgreSQL's, and InnoDB's) matches its WHERE against the last committed row,
    /// which has no token, and so passes over the row without waiting for its lock (a lost
    /// lease).
    pub fn hold_lease(&self) {
        self.lease_pending.store(true, Ordering::Release);
    }

    /// The claim's commit wrote the job's lease.
    pub fn lease_written(&self) {
        if self.lease_pending.swap(false, Ordering::AcqRel) {
            self.lease_written.notify_waiters();
        }
    }

    /// Resolves once the job's lease is written (at once for a job claimed under a lease).
    pub async fn leased(&self) {
        loop {
            let woken = self.lease_written.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if !self.lease_pending.load(Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }

    /// Resolves once the job is stopped (or has ended).
    pub async fn stopped(&self) {
        loop {
            let woken = self.notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            woken.await;
        }
    }
}
