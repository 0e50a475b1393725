//! An in-memory backend of backlog: the whole [`Backend`] seam with the SQL backends' behaviour
//! and no database, for tests that run without one and without sleeps
//! (`Client::from_backend(Arc::new(MemoryBackend::new()))` in the `backlog` crate).
//!
//! Map:
//! - [`MemoryBackend`]: the backend. Its tables are plain collections behind one lock; time is
//!   only ever the `now` each call passes in, so a test that advances a `ManualClock` controls
//!   leases, schedules and rescues completely.
//! - [`MemoryTx`]: a transaction the caller controls (`Backend::begin`), optimistic: its
//!   enqueues and completions are kept in it and applied at commit, if still valid.
//! - [`SCHEMA_VERSION`]: the version of the SQL contract whose behaviour it follows.
//!
//! The conformance suite of `backlog-sql` (`crates/backlog-sql/tests/conformance/`) runs
//! against it as against every database.
//!
//! # Example
//! ```
//! use std::time::Duration;
//!
//! use backlog_core::*;
//! use backlog_memory::MemoryBackend;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<()> {
//! let backend = MemoryBackend::new();
//! let queue = QueueName::new("emails")?;
//! let payload = Payload::parse(r#"{"to":"a@example.com"}"#, DEFAULT_PAYLOAD_LIMIT)?;
//! let now = 1_000_000;
//! let jobs = vec![NewJob::new(queue.clone(), payload)];
//! let id = backend.job_insert(JobInsertParams { jobs, now }).await?[0].id;
//!
//! let claim = JobClaimParams {
//!     queue,
//!     kinds: vec![],
//!     limit: 10,
//!     owner: "worker-1".into(),
//!     lease: Duration::from_secs(30),
//!     now,
//!     order: Ordering::Fifo,
//!     strategy: backend.capabilities().default_strategy(),
//!     global_limit: false,
//! };
//! let claimed = backend.job_claim(&claim).await?;
//! let jobs = vec![claimed[0].job_ref()];
//! let retention = Retention::Keep;
//! backend.job_complete(JobCompleteParams { jobs, now, retention }).await?;
//! assert_eq!(backend.job_get(id).await?.unwrap().state, JobState::Completed);
//! # Ok(()) }
//! ```

mod jobs;
mod leader;
mod queues;
mod state;
mod stats;
mod table;
mod tx;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use backlog_core::{
    AdminAction, AuditEntry, AuditListParams, Backend, BackendTx, Capabilities, ClaimedJob,
    CronFireParams, EnqueueOutcome, Error, Job, JobClaimParams, JobCompleteParams,
    JobCountPendingParams, JobFailParams, JobHeartbeatParams, JobInsertParams, JobListParams,
    JobProgressParams, JobPruneParams, JobRef, JobReleaseParams, JobRescueParams, LeaderParams,
    MigrateReport, QueueInfo, QueueName, QueueRedriveParams, QueueSettings, QueueStats, Rescued,
    Result, StatDepth, StatRow, TxClaim, WakeFn,
};

use crate::state::State;
pub use crate::tx::MemoryTx;

/// The schema version whose contract this backend follows: the SQL backends' `SCHEMA_VERSION`
/// (the conformance suite checks that the two agree).
pub const SCHEMA_VERSION: i64 = 20;

/// A backend that keeps everything in memory, behind one lock: what a database holds lasts as
/// long as the value. Every operation behaves as on the SQL backends (the conformance suite runs
/// against it), except what needs row locks: there is no transaction claim mode (`job_claim_tx`
/// is `Unsupported`, as on SQLite). Transactions the caller controls (`begin`, `Client::begin`)
/// are [`MemoryTx`]s: optimistic, their writes checked again and applied together at commit, so
/// an open one never makes another caller wait.
///
/// It is a single writer: every claim strategy takes the same path. [`Backend::listen`] works:
/// the wake function hears of every queue that gets a due job (an enqueue, a retry, a release, a
/// rescue, an operator's release, retry or redrive), at once. `migrate` has nothing to do (the
/// backend is born at [`SCHEMA_VERSION`]) and `close` nothing to release.
///
/// # Example
/// ```
/// use std::sync::Arc;
///
/// use backlog_core::Backend;
/// use backlog_memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> backlog_core::Result<()> {
/// let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
/// assert_eq!(backend.migrate().await?.current, backlog_memory::SCHEMA_VERSION);
/// assert!(backend.job_get(1).await?.is_none());
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct MemoryBackend {
    /// Shared with the backend's open transactions, which apply their writes to it at commit.
    state: Arc<Mutex<State>>,
}

impl MemoryBackend {
    /// An empty backend: no job, no queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// The job a completion (retention `archive`) or an archiving prune moved to the archive
    /// (`backlog_job_archive` in the SQL backends), for tests that look there.
    pub fn archived(&self, id: i64) -> Option<Job> {
        self.with(|s| s.jobs.archived(id).cloned())
    }

    /// Runs `f` on the state under the lock (see [`with`]).
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        with(&self.state, f)
    }
}

/// Runs `f` on the state under the lock, then wakes the queues it noted, with the lock let go (a
/// wake function may call back into the backend).
pub(crate) fn with<R>(state: &Mutex<State>, f: impl FnOnce(&mut State) -> R) -> R {
    let mut state = lock(state);
    let r = f(&mut state);
    let woken = std::mem::take(&mut state.woken);
    let wakes = if woken.is_empty() {
        vec![]
    } else {
        state.wakes.clone()
    };
    drop(state);
    for queue in &woken {
        for wake in &wakes {
            wake(queue);
        }
    }
    r
}

/// The state, locked.
pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // An operation checks what it is given before it changes anything, so a panic under the lock
    // (a bug) leaves the tables as they were or as one finished step left them: keep serving them
    // rather than failing every later call of the test.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait]
impl Backend for MemoryBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            skip_locked: false,
            single_writer: true,
            few_claimers: false,
            row_locks: false,
            bounded_tx_claims: false,
        }
    }

    /// A [`MemoryTx`]: optimistic, its writes checked again and applied at commit.
    async fn begin(&self) -> Result<Box<dyn BackendTx>> {
        Ok(Box::new(MemoryTx::new(Arc::clone(&self.state))))
    }

    async fn migrate(&self) -> Result<MigrateReport> {
        Ok(MigrateReport {
            applied: vec![],
            current: SCHEMA_VERSION,
        })
    }

    async fn job_insert(&self, p: JobInsertParams) -> Result<Vec<EnqueueOutcome>> {
        self.with(|s| s.job_insert(p.jobs, p.now))
    }

    async fn job_claim(&self, p: &JobClaimParams) -> Result<Vec<ClaimedJob>> {
        Ok(self.with(|s| s.job_claim(p)))
    }

    async fn job_claim_tx(&self, _p: &JobClaimParams) -> Result<Option<Box<dyn TxClaim>>> {
        Err(Error::Unsupported(
            "transaction claim mode needs row locks; the in-memory backend has none",
        ))
    }

    async fn job_complete(&self, p: JobCompleteParams) -> Result<Vec<JobRef>> {
        Ok(self.with(|s| s.job_complete(p)))
    }

    async fn job_fail(&self, p: JobFailParams) -> Result<()> {
        self.with(|s| s.job_fail(p))
    }

    async fn job_release(&self, p: JobReleaseParams) -> Result<()> {
        self.with(|s| s.job_release(p))
    }

    async fn job_heartbeat(&self, p: JobHeartbeatParams) -> Result<bool> {
        self.with(|s| s.job_heartbeat(p))
    }

    async fn job_progress(&self, p: JobProgressParams) -> Result<()> {
        self.with(|s| s.job_progress(p))
    }

    async fn job_cancel_request(&self, id: i64, now: i64) -> Result<Job> {
        self.with(|s| s.job_cancel_request(id, now))
    }

    async fn job_prune(&self, p: JobPruneParams) -> Result<u64> {
        Ok(self.with(|s| s.job_prune(p)))
    }

    async fn schema_version(&self) -> Result<i64> {
        Ok(SCHEMA_VERSION)
    }

    async fn queue_oldest_due(&self, now: i64) -> Result<Vec<(String, i64)>> {
        Ok(self.with(|s| s.queue_oldest_due(now)))
    }

    async fn leader_elect(&self, p: &LeaderParams) -> Result<Option<i64>> {
        Ok(self.with(|s| s.leader_elect(p)))
    }

    async fn leader_resign(&self, name: &str, holder: &str) -> Result<()> {
        self.with(|s| s.leader_resign(name, holder));
        Ok(())
    }

    async fn cron_declare(&self, schedules: &[backlog_core::CronSchedule]) -> Result<()> {
        self.with(|s| {
            for c in schedules {
                s.cron.entry(c.name.clone()).or_insert(0);
                s.cron_declared.insert(c.name.clone(), c.clone());
            }
        });
        Ok(())
    }

    async fn cron_list(&self) -> Result<Vec<backlog_core::CronSchedule>> {
        Ok(self.with(|s| {
            let mut names: Vec<&String> = s.cron.keys().collect();
            names.sort();
            names
                .into_iter()
                .map(|name| {
                    let last_tick = s.cron[name];
                    match s.cron_declared.get(name) {
                        Some(c) => backlog_core::CronSchedule {
                            last_tick,
                            ..c.clone()
                        },
                        None => backlog_core::CronSchedule {
                            name: name.clone(),
                            schedule: None,
                            queue: None,
                            kind: None,
                            last_tick,
                            next_tick: None,
                            declared_at: None,
                        },
                    }
                })
                .collect()
        }))
    }

    async fn worker_beat(&self, w: &backlog_core::WorkerRegistration) -> Result<()> {
        self.with(|s| {
            // worker_beat.sql: the id, host, pid, version and start of a row stay as written.
            let row = s.workers.entry(w.id.clone()).or_insert_with(|| w.clone());
            row.queues = w.queues.clone();
            row.running = w.running;
            row.seen_at = w.seen_at;
            row.expires_at = w.expires_at;
        });
        Ok(())
    }

    async fn worker_gone(&self, id: &str) -> Result<()> {
        self.with(|s| s.workers.remove(id));
        Ok(())
    }

    async fn worker_list(&self) -> Result<Vec<backlog_core::WorkerRegistration>> {
        Ok(self.with(|s| {
            let mut all: Vec<_> = s.workers.values().cloned().collect();
            all.sort_by(|a, b| (a.started_at, &a.id).cmp(&(b.started_at, &b.id)));
            all
        }))
    }

    async fn worker_prune(&self, before: i64) -> Result<u64> {
        Ok(self.with(|s| {
            let n = s.workers.len();
            s.workers.retain(|_, w| w.expires_at >= before);
            (n - s.workers.len()) as u64
        }))
    }

    async fn cron_fire(&self, p: CronFireParams) -> Result<Option<EnqueueOutcome>> {
        self.with(|s| s.cron_fire(p))
    }

    async fn topic_subscribe(
        &self,
        topic: &QueueName,
        queue: &QueueName,
        subscribe: bool,
        _now: i64,
    ) -> Result<()> {
        self.with(|s| s.topic_subscribe(topic, queue, subscribe));
        Ok(())
    }

    async fn topic_subscribers(&self, topic: &QueueName) -> Result<Vec<QueueName>> {
        self.with(|s| s.topic_subscribers(topic))
    }

    async fn listen(&self, wake: WakeFn) -> Result<bool> {
        self.with(|s| s.wakes.push(wake));
        Ok(true)
    }

    async fn job_rescue(&self, p: JobRescueParams) -> Result<Vec<Rescued>> {
        Ok(self.with(|s| s.job_rescue(p)))
    }

    async fn group_promote(&self, p: backlog_core::GroupPromoteParams) -> Result<u64> {
        Ok(self.with(|s| s.group_promote(p.queue.as_str(), &p.groups, p.now)))
    }

    async fn group_sweep(&self, now: i64) -> Result<u64> {
        Ok(self.with(|s| s.group_sweep(now)))
    }

    async fn queue_flow(&self, queue: &QueueName, now: i64) -> Result<backlog_core::QueueFlow> {
        Ok(self.with(|s| s.queue_flow(queue.as_str(), now)))
    }

    async fn job_get(&self, id: i64) -> Result<Option<Job>> {
        Ok(self.with(|s| s.jobs.get_or_archived(id).cloned()))
    }

    async fn job_list(&self, p: JobListParams) -> Result<Vec<Job>> {
        Ok(self.with(|s| s.job_list(&p)))
    }

    async fn job_admin(&self, id: i64, action: AdminAction, now: i64) -> Result<Job> {
        self.with(|s| s.job_admin(id, action, now))
    }

    async fn job_delete(&self, id: i64, now: i64) -> Result<Job> {
        self.with(|s| s.job_delete(id, now))
    }

    async fn job_count_pending(&self, p: &JobCountPendingParams) -> Result<i64> {
        Ok(self.with(|s| s.job_count_pending(p)))
    }

    async fn queue_redrive(&self, p: QueueRedriveParams) -> Result<u64> {
        Ok(self.with(|s| s.queue_redrive(p)))
    }

    async fn queue_get(&self, name: &QueueName) -> Result<Option<QueueSettings>> {
        Ok(self.with(|s| s.queue_get(name)))
    }

    async fn queue_ensure(&self, name: &QueueName, _now: i64) -> Result<()> {
        self.with(|s| s.queue_ensure(name));
        Ok(())
    }

    async fn queue_upsert(&self, settings: &QueueSettings, _now: i64) -> Result<()> {
        self.with(|s| s.queue_upsert(settings))
    }

    async fn queue_set_paused(&self, name: &QueueName, paused: bool, _now: i64) -> Result<()> {
        self.with(|s| s.queue_set_paused(name, paused));
        Ok(())
    }

    async fn queue_list(&self) -> Result<Vec<QueueInfo>> {
        Ok(self.with(|s| s.queue_list()))
    }

    async fn queue_stats(
        &self,
        queue: Option<&QueueName>,
        now: i64,
    ) -> Result<Vec<(String, QueueStats)>> {
        Ok(self.with(|s| s.queue_stats(queue, now)))
    }

    async fn stat_add(&self, rows: &[StatRow]) -> Result<()> {
        self.with(|s| s.stat_add(rows));
        Ok(())
    }

    async fn stat_snapshot(&self, minute: i64, depths: &[(String, StatDepth)]) -> Result<()> {
        self.with(|s| s.stat_snapshot(minute, depths));
        Ok(())
    }

    async fn stat_history(&self, queue: Option<&QueueName>, since: i64) -> Result<Vec<StatRow>> {
        Ok(self.with(|s| s.stat_history(queue, since)))
    }

    async fn stat_totals(&self) -> Result<Vec<StatRow>> {
        Ok(self.with(|s| s.stat_totals()))
    }

    async fn stat_prune(&self, before: i64) -> Result<u64> {
        Ok(self.with(|s| s.stat_prune(before)))
    }

    async fn audit_add(&self, entry: &AuditEntry) -> Result<i64> {
        self.with(|s| s.audit_add(entry))
    }

    async fn audit_list(&self, p: &AuditListParams) -> Result<Vec<AuditEntry>> {
        Ok(self.with(|s| s.audit_list(p)))
    }

    async fn close(&self) {}
}
