//! Transactions the caller controls ([`Backend::begin`](backlog_core::Backend::begin)): writes
//! kept in the transaction, checked again and applied together at commit, under the backend's
//! one lock.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use backlog_core::{
    BackendTx, DbErrorKind, EnqueueOutcome, Error, JobCompleteParams, JobRef, NewJob, QueueName,
    Result, Retention,
};

use crate::jobs::check_new;
use crate::state::State;
use crate::{lock, with};

/// A transaction of a [`MemoryBackend`](crate::MemoryBackend), begun by its `begin`
/// (`Client::begin` in the `backlog` crate); what `JobTx::backend_tx().as_any_mut()` downcasts
/// to.
///
/// # Isolation: optimistic
/// Its writes are kept in the value, not applied: no one else sees a job it enqueued, or a
/// completion it made, until it commits, and no one ever does after a rollback or a drop
/// without commit. A job it enqueues gets its id at once, drawn from the table's counter, so the
/// id is the one the job has after commit (and, as with a database sequence, one a rollback
/// spends for good). What it reads is the committed state and its own writes: an enqueue with a
/// unique key finds a committed unfinished job holding the key (unless this transaction
/// completes that job) or this transaction's own earlier job, and a completion is fenced by the
/// lease tokens as [`job_complete`](backlog_core::Backend::job_complete) is.
///
/// At commit, under the lock, what its writes depend on is checked again: every job it
/// completed must still run under the same lease, and every unique key its new jobs take must
/// still be free. Then all its writes are applied at once (completions, the queues' rows, the
/// new jobs, whose queues are woken). If a check fails, nothing is applied and commit fails with
/// [`Error::LeaseLost`] for a job someone else completed, failed or rescued in between (so a
/// stale completion never gets through), or with a [`DbErrorKind::SerializationFailure`] (a
/// transient error: run the transaction again, and the enqueue finds the new holder) for a key
/// another commit took. An error from `enqueue` or `complete` itself (a CHECK constraint)
/// changes nothing, and the transaction stays usable.
///
/// Why not SQLite's way, the one writer lock held from begin to end: the backend's lock is
/// held for one operation at a time, never across an `.await`. A transaction that kept it (or
/// an async writer lock every operation took) would make any test that calls the backend while
/// its transaction is open (a handler that heartbeats, the same task reading a job) wait
/// forever where a database would time out, and a transaction a test forgot would stall every
/// other. This one holds nothing between calls, so it cannot deadlock, and the check at commit
/// keeps out whatever the transaction did not see. What a test can tell from a SQL backend:
/// there, the transaction's completion locks the job's row, so a concurrent completion waits
/// and then finds the lease gone; here the first to commit wins, and the other fails.
pub struct MemoryTx {
    state: Arc<Mutex<State>>,
    /// The jobs it created, in order, with their ids.
    created: Vec<Created>,
    /// The queues of every job it enqueued: their rows are created at commit.
    queues: Vec<QueueName>,
    /// The jobs it completed.
    completed: Vec<Completed>,
}

/// A job a transaction enqueued and created.
struct Created {
    id: i64,
    job: NewJob,
    now: i64,
}

/// A job a transaction completed.
struct Completed {
    job: JobRef,
    now: i64,
    retention: Retention,
}

/// Counts, as the backend's own `Debug` shows.
impl std::fmt::Debug for MemoryTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTx")
            .field("created", &self.created.len())
            .field("completed", &self.completed.len())
            .finish_non_exhaustive()
    }
}

impl MemoryTx {
    pub(crate) fn new(state: Arc<Mutex<State>>) -> Self {
        MemoryTx {
            state,
            created: vec![],
            queues: vec![],
            completed: vec![],
        }
    }

    /// Whether this transaction completes the job.
    fn completes(&self, id: i64) -> bool {
        self.completed.iter().any(|c| c.job.id == id)
    }

    /// The committed unfinished job holding a unique key, unless this transaction completes it.
    fn committed_holder(&self, s: &State, queue: &str, key: &str) -> Option<i64> {
        s.jobs
            .key_holder(queue, key)
            .filter(|&id| !self.completes(id))
    }

    /// The job holding a unique key as this transaction sees it: one it created, else a
    /// committed one.
    fn key_holder(&self, s: &State, queue: &str, key: &str) -> Option<i64> {
        self.created
            .iter()
            .find(|c| {
                c.job.queue.as_str() == queue
                    && c.job.unique_key.as_ref().is_some_and(|k| k.as_str() == key)
            })
            .map(|c| c.id)
            .or_else(|| self.committed_holder(s, queue, key))
    }

    /// Checks what the writes depend on, then applies them all; or applies none.
    fn apply(self, s: &mut State) -> Result<()> {
        if let Some(c) = self.completed.iter().find(|c| !s.leased(c.job)) {
            return Err(Error::LeaseLost { job_id: c.job.id });
        }
        for c in &self.created {
            let queue = c.job.queue.as_str();
            if let Some(key) = &c.job.unique_key
                && let Some(holder) = self.committed_holder(s, queue, key.as_str())
            {
                return Err(Error::Database {
                    kind: DbErrorKind::SerializationFailure,
                    source: format!(
                        "unique key {:?} of queue {queue:?} was taken by job {holder}, committed \
                         after this transaction enqueued job {} with it; nothing was committed",
                        key.as_str(),
                        c.id
                    )
                    .into(),
                });
            }
        }
        for c in self.completed {
            s.job_complete(JobCompleteParams {
                jobs: vec![c.job],
                now: c.now,
                retention: c.retention,
            });
        }
        for queue in &self.queues {
            s.queue_ensure(queue);
        }
        let mut grouped = vec![];
        for c in self.created {
            if let Some(g) = &c.job.group {
                grouped.push((
                    c.job.queue.as_str().to_owned(),
                    g.as_str().to_owned(),
                    c.now,
                ));
            }
            s.insert_row(c.id, c.job, c.now);
        }
        for (queue, group, now) in grouped {
            s.group_promote(&queue, &[group], now);
        }
        Ok(())
    }
}

#[async_trait]
impl BackendTx for MemoryTx {
    async fn enqueue(&mut self, jobs: Vec<NewJob>, now: i64) -> Result<Vec<EnqueueOutcome>> {
        check_new(&jobs)?;
        let state = Arc::clone(&self.state);
        let mut s = lock(&state);
        s.check_parents(&jobs)?;
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            if !self.queues.contains(&job.queue) {
                self.queues.push(job.queue.clone());
            }
            let queue = job.queue.as_str();
            if let Some(key) = &job.unique_key
                && let Some(id) = self.key_holder(&s, queue, key.as_str())
            {
                out.push(EnqueueOutcome { id, created: false });
                continue;
            }
            let id = s.jobs.next_id();
            self.created.push(Created { id, job, now });
            out.push(EnqueueOutcome { id, created: true });
        }
        Ok(out)
    }

    async fn complete(&mut self, p: &JobCompleteParams) -> Result<Vec<JobRef>> {
        let state = Arc::clone(&self.state);
        let s = lock(&state);
        let mut done = Vec::with_capacity(p.jobs.len());
        for &r in &p.jobs {
            // A job completed already, here or earlier in the transaction, has no lease left.
            if s.leased(r) && !self.completes(r.id) {
                self.completed.push(Completed {
                    job: r,
                    now: p.now,
                    retention: p.retention,
                });
                done.push(r);
            }
        }
        Ok(done)
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        let state = Arc::clone(&self.state);
        with(&state, |s| self.apply(s))
    }

    async fn rollback(self: Box<Self>) -> Result<()> {
        // Nothing was applied: dropping the writes is the rollback.
        Ok(())
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
