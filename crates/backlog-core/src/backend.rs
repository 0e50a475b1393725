//! The backend seam: one trait with one method per database operation.

use std::time::Duration;

use async_trait::async_trait;

use crate::{
    AuditEntry, AuditListParams, ClaimedJob, EnqueueOutcome, Job, JobRef, JobState, Kind, NewJob,
    Ordering, QueueFlow, QueueInfo, QueueName, QueueSettings, QueueStats, Result, Retention,
    StatDepth, StatRow, StateFilter,
};

/// Called with a queue name when jobs arrive in it.
pub type WakeFn = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// How a claim picks and takes jobs. The backend's [`Capabilities`] say which it supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimStrategy {
    /// `SELECT … FOR UPDATE SKIP LOCKED` (PostgreSQL, MySQL 8, MariaDB 10.6+).
    SkipLocked,
    /// One `UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING` on a single-writer engine (SQLite).
    SingleWriter,
    /// `UPDATE … SET lease_token = ? … LIMIT n`, then `SELECT` by token (seeds S3 and S5): for
    /// engines without SKIP LOCKED.
    ClaimToken,
}

/// What a backend can do; code asks this instead of comparing database names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// `FOR UPDATE SKIP LOCKED`.
    pub skip_locked: bool,
    /// One writer at a time (claims never race).
    pub single_writer: bool,
    /// Claimers of one queue slow each other down more than the size of their claims costs
    /// (MySQL, MariaDB: each claim scans past the entries the others' claims left
    /// delete-marked at the head of the claim index), so workers claim with few loops taking
    /// large claims.
    pub few_claimers: bool,
    /// Row locks held by an open transaction (transaction claim mode).
    pub row_locks: bool,
    /// A transaction claim's transaction ends on its own when its client falls silent for the
    /// claim's lease (PostgreSQL's `idle_in_transaction_session_timeout`, set for that
    /// transaction alone; MySQL's `wait_timeout`, set for the session while the claim lasts), so
    /// a worker cut off mid-claim holds its jobs no longer than a lease;
    /// the worker runtime claims in transaction claim mode only then.
    pub bounded_tx_claims: bool,
}

impl Capabilities {
    /// The best claim strategy for these capabilities.
    pub fn default_strategy(&self) -> ClaimStrategy {
        if self.single_writer {
            ClaimStrategy::SingleWriter
        } else if self.skip_locked {
            ClaimStrategy::SkipLocked
        } else {
            ClaimStrategy::ClaimToken
        }
    }

    /// Every strategy this backend can run.
    pub fn strategies(&self) -> Vec<ClaimStrategy> {
        let mut v = vec![self.default_strategy()];
        if self.skip_locked && !v.contains(&ClaimStrategy::SkipLocked) {
            v.push(ClaimStrategy::SkipLocked);
        }
        v.push(ClaimStrategy::ClaimToken);
        v.dedup();
        v
    }
}

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    /// Versions applied by this call (empty when already current).
    pub applied: Vec<i64>,
    /// The schema version now.
    pub current: i64,
}

/// Input of [`Backend::job_insert`].
#[derive(Debug, Clone)]
pub struct JobInsertParams {
    /// The jobs, in order; outcomes come back in the same order.
    pub jobs: Vec<NewJob>,
    /// Now.
    pub now: i64,
}

/// Input of [`Backend::job_claim`] and [`Backend::job_claim_tx`].
#[derive(Debug, Clone)]
pub struct JobClaimParams {
    /// The queue to claim from.
    pub queue: QueueName,
    /// Only these kinds (empty: any kind).
    pub kinds: Vec<Kind>,
    /// At most this many jobs.
    pub limit: u32,
    /// Who claims (stored as the lease owner).
    pub owner: String,
    /// Lease length.
    pub lease: Duration,
    /// Now.
    pub now: i64,
    /// FIFO or LIFO among equal priorities.
    pub order: Ordering,
    /// How to claim.
    pub strategy: ClaimStrategy,
    /// The queue has a global concurrency limit or a rate limit: the claim takes the queue's
    /// lock, counts the jobs running in every process and the rate limit's tokens, and claims at
    /// most what the limits leave. (A claim without it finds nothing in such a queue, so a stale
    /// setting never breaks a limit.)
    pub global_limit: bool,
}

/// Input of [`Backend::job_complete`].
#[derive(Debug, Clone)]
pub struct JobCompleteParams {
    /// The jobs with their lease tokens.
    pub jobs: Vec<JobRef>,
    /// Now.
    pub now: i64,
    /// What to do with the rows.
    pub retention: Retention,
}

/// Input of [`Backend::job_complete_claim`]: a worker's finished jobs and its next claim, of one
/// queue.
#[derive(Debug, Clone)]
pub struct JobCompleteClaimParams {
    /// The finished jobs to complete first.
    pub complete: JobCompleteParams,
    /// The claim that follows.
    pub claim: JobClaimParams,
    /// A hint that the claim will find jobs (the last claim of this queue took as many as it
    /// asked for). A backend may then take a statement that costs less when the claim finds
    /// jobs and a second round trip when it finds none; what is completed and claimed is the
    /// same either way.
    pub expect_jobs: bool,
    /// The ordered group of each finished job that has one, once per such job (a group twice
    /// when two of its jobs finished). Each completed job's turn in its group goes to the
    /// group's next job: claimed at once by this call where the backend can hand it over
    /// (its count of running jobs unchanged), otherwise promoted, in the same commit where the
    /// backend can.
    pub groups: Vec<String>,
}

/// What [`Backend::job_complete_claim`] did.
#[derive(Debug)]
pub struct CompleteClaimed {
    /// The jobs completed (the others had lost their lease).
    pub completed: Vec<JobRef>,
    /// The jobs claimed, or why the claim failed after the completion was committed (only where
    /// the two are separate commits; a backend that does both in one commit fails as a whole).
    pub claimed: Result<Vec<ClaimedJob>>,
    /// Jobs of the finished jobs' groups made available by the call.
    pub promoted: u64,
}

/// [`Backend::job_complete_claim`] as two operations, [`Backend::job_complete`] and then
/// [`Backend::job_claim`]: the default, and what a backend falls back to where it cannot fold the
/// two into one statement or transaction.
pub async fn complete_then_claim<B: Backend + ?Sized>(
    backend: &B,
    params: JobCompleteClaimParams,
) -> Result<CompleteClaimed> {
    let completed = if params.complete.jobs.is_empty() {
        vec![]
    } else {
        backend.job_complete(params.complete).await?
    };
    // A promotion that fails leaves the group to the leader's sweep: the completion stands.
    let promoted = match params.groups.is_empty() {
        true => 0,
        false => backend
            .group_promote(GroupPromoteParams {
                queue: params.claim.queue.clone(),
                groups: params.groups,
                now: params.claim.now,
            })
            .await
            .unwrap_or(0),
    };
    Ok(CompleteClaimed {
        completed,
        claimed: backend.job_claim(&params.claim).await,
        promoted,
    })
}

/// Input of [`Backend::group_promote`].
#[derive(Debug, Clone)]
pub struct GroupPromoteParams {
    /// The queue.
    pub queue: QueueName,
    /// Groups of the queue in which a job finished, failed or arrived.
    pub groups: Vec<String>,
    /// Now.
    pub now: i64,
}

/// Input of [`Backend::job_fail`].
#[derive(Debug, Clone)]
pub struct JobFailParams {
    /// The job with its lease token.
    pub job: JobRef,
    /// Now.
    pub now: i64,
    /// The error, appended to the job's history.
    pub error: String,
    /// When to retry; `None` makes the job dead (or cancelled, see `cancelled`).
    pub retry_at: Option<i64>,
    /// With no `retry_at`: end in `cancelled` instead of `dead` (a handler's cancel outcome).
    pub cancelled: bool,
}

impl JobFailParams {
    /// The state, `run_at` and `finished_at` the failure leads to: available at `retry_at`, or
    /// else cancelled or dead, finished now.
    pub fn target(&self) -> (JobState, i64, Option<i64>) {
        match self.retry_at {
            Some(at) => (JobState::Available, at, None),
            None if self.cancelled => (JobState::Cancelled, self.now, Some(self.now)),
            None => (JobState::Dead, self.now, Some(self.now)),
        }
    }
}

/// Input of [`Backend::job_release`].
#[derive(Debug, Clone)]
pub struct JobReleaseParams {
    /// The job with its lease token.
    pub job: JobRef,
    /// Now.
    pub now: i64,
    /// When it may run again.
    pub run_at: i64,
}

/// Input of [`Backend::job_heartbeat`].
#[derive(Debug, Clone)]
pub struct JobHeartbeatParams {
    /// The job with its lease token.
    pub job: JobRef,
    /// The new lease expiry.
    pub lease_expires_at: i64,
}

/// Input of [`Backend::job_progress`].
#[derive(Debug, Clone)]
pub struct JobProgressParams {
    /// The job with its lease token.
    pub job: JobRef,
    /// Progress to store (JSON), if any.
    pub progress: Option<String>,
    /// Result to store (JSON), if any.
    pub result: Option<String>,
}

/// Input of [`Backend::job_prune`].
#[derive(Debug, Clone)]
pub struct JobPruneParams {
    /// The queue.
    pub queue: QueueName,
    /// Finished state to prune (completed, cancelled or dead).
    pub state: JobState,
    /// Only jobs finished before this time.
    pub finished_before: i64,
    /// At most this many (bounded batches keep transactions short).
    pub limit: u32,
    /// Move to `backlog_job_archive` instead of deleting.
    pub archive: bool,
}

/// Input of [`Backend::job_done_turn`].
#[derive(Debug, Clone, Copy)]
pub struct JobDoneTurnParams {
    /// Now, by the client's clock.
    pub now: i64,
    /// How long completions write one table of the ring before it turns to the next (see
    /// [`done_period`]).
    pub period: std::time::Duration,
    /// Completed jobs that finished before this are past the time they are kept: a table of
    /// the ring whose every job finished before it is emptied.
    pub finished_before: i64,
}

/// Input of [`Backend::job_vacuum`].
#[derive(Debug, Clone, Copy)]
pub struct JobVacuumParams {
    /// Reclaim only when the database counts more dead rows in the job table than this, plus a
    /// tenth of its live rows.
    pub min_dead: u64,
    /// When reclaiming left the dead rows in place because another session's snapshot may
    /// still see them, compact the table (copy its rows, empty it, put them back) if it holds
    /// at most this many rows; 0: never.
    pub compact_max_live: u64,
    /// How long a compaction may wait for the table's lock before it gives up for this time
    /// (sessions that need the table meanwhile wait behind it).
    pub compact_lock_wait: std::time::Duration,
    /// PostgreSQL keeps completed jobs in a ring of 16 partitions, each written for this long
    /// in turn and emptied whole once the prune has deleted its rows: long enough that the ring
    /// outlasts the time completed jobs are kept (see [`done_period`]).
    pub done_period: std::time::Duration,
}

/// The period of PostgreSQL's ring of completed jobs' partitions for jobs kept `keep` and
/// pruned every `prune_every`: a partition's slot comes round again after 16 periods, and
/// its last rows are pruned `keep` plus up to `prune_every` after its period ends, so 12
/// periods cover both with a margin of three. At least 5 s, at most 6 hours.
pub fn done_period(
    keep: std::time::Duration,
    prune_every: std::time::Duration,
) -> std::time::Duration {
    use std::time::Duration;
    ((keep + prune_every) / 12).clamp(Duration::from_secs(5), Duration::from_secs(6 * 3600))
}

/// What [`Backend::job_vacuum`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobVacuumed {
    /// The dead rows the database counted in the job table before reclaiming them.
    pub dead: u64,
    /// The dead rows another session's snapshot kept past the reclaim, if any were.
    pub kept: u64,
    /// After those were kept: the rows a compaction copied back (`Some`), or `None` when it did
    /// not run or left the table alone (too many rows, or another session holds the table).
    pub compacted: Option<u64>,
    /// Parts of the completed jobs' storage emptied whole (PostgreSQL's ring partitions whose
    /// rows the prune had all deleted).
    pub emptied: u64,
}

/// Input of [`Backend::leader_elect`].
#[derive(Debug, Clone)]
pub struct LeaderParams {
    /// What is led (one leader per name).
    pub name: String,
    /// Who asks (unique per process).
    pub holder: String,
    /// Now.
    pub now: i64,
    /// Until when the leadership holds unless renewed.
    pub expires_at: i64,
}

/// Input of [`Backend::cron_fire`].
#[derive(Debug, Clone)]
pub struct CronFireParams {
    /// The schedule's name.
    pub name: String,
    /// The tick (a time) being fired; fires only if later than the last tick fired.
    pub tick: i64,
    /// The job to enqueue for it.
    pub job: NewJob,
    /// Now.
    pub now: i64,
}

/// Input of [`Backend::job_rescue`].
#[derive(Debug, Clone)]
pub struct JobRescueParams {
    /// Now: leases that expired before this are rescued.
    pub now: i64,
    /// At most this many jobs.
    pub limit: u32,
}

/// A job [`Backend::job_rescue`] made available again (or dead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescued {
    /// Its queue.
    pub queue: String,
    /// It was on its last attempt and is dead now.
    pub dead: bool,
}

/// The oldest open transaction of another session: while it stays open the database keeps every
/// row version it might see (PostgreSQL's xmin horizon, InnoDB's purge), so finished jobs leave
/// dead rows that slow claims until it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct OldestTransaction {
    /// The session's process id (PostgreSQL) or connection id (MySQL).
    pub pid: i64,
    /// How long its transaction has been open.
    pub age: Duration,
    /// What the session is doing (`idle in transaction`, `active`, …).
    pub state: String,
    /// The application name or user it reported.
    pub client: String,
}

/// Input of [`Backend::job_list`].
#[derive(Debug, Clone)]
pub struct JobListParams {
    /// Only this queue.
    pub queue: Option<QueueName>,
    /// Only this state.
    pub state: Option<StateFilter>,
    /// Only this kind.
    pub kind: Option<Kind>,
    /// Only jobs with this unique key.
    pub unique_key: Option<String>,
    /// Only ids greater than this (paging).
    pub after_id: i64,
    /// At most this many.
    pub limit: u32,
    /// Now (to tell available from scheduled).
    pub now: i64,
}

/// Input of [`Backend::job_count_pending`].
#[derive(Debug, Clone)]
pub struct JobCountPendingParams {
    /// Jobs of these queues.
    pub queues: Vec<QueueName>,
    /// Only jobs of these kinds (empty: any kind), as a worker limited to them claims: a job
    /// without a kind is then left out too.
    pub kinds: Vec<Kind>,
    /// Count an available job only when it is due by this time; `None` counts it whenever it
    /// is due (scheduled jobs and jobs waiting to retry included). Running jobs always count.
    pub due_by: Option<i64>,
}

/// Input of [`Backend::queue_redrive`].
#[derive(Debug, Clone)]
pub struct QueueRedriveParams {
    /// The queue whose dead jobs move back.
    pub queue: QueueName,
    /// At most this many.
    pub limit: u32,
    /// Now.
    pub now: i64,
}

/// An operator's action on a job that is not running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAction {
    /// available, waiting or held → cancelled.
    Cancel,
    /// available → held.
    Hold,
    /// held → available.
    Release,
    /// dead, cancelled or completed → available, attempts reset.
    Retry,
    /// available (scheduled, or retrying after a failure) → due at once, attempts kept.
    RunNow,
}

impl std::str::FromStr for AdminAction {
    type Err = crate::Error;

    /// The action's name as the API and the command spell it: `retry`, `cancel`, `hold`,
    /// `release`, `run_now` (or `run-now`).
    fn from_str(s: &str) -> crate::Result<Self> {
        Ok(match s {
            "retry" => AdminAction::Retry,
            "cancel" => AdminAction::Cancel,
            "hold" => AdminAction::Hold,
            "release" => AdminAction::Release,
            "run_now" | "run-now" => AdminAction::RunNow,
            _ => {
                return Err(crate::Error::OptionInvalid {
                    what: "action",
                    value: s.to_owned(),
                    expected: "retry, cancel, hold, release, run_now",
                });
            }
        })
    }
}

impl AdminAction {
    /// The states the action applies to.
    pub fn from_states(self) -> &'static [JobState] {
        match self {
            AdminAction::Cancel => &[JobState::Available, JobState::Waiting, JobState::Held],
            AdminAction::Hold => &[JobState::Available],
            AdminAction::Release => &[JobState::Held],
            AdminAction::Retry => &[JobState::Dead, JobState::Cancelled, JobState::Completed],
            AdminAction::RunNow => &[JobState::Available],
        }
    }

    /// The state the job ends in (a job of an ordered group that would become available waits
    /// for its group's turn instead).
    pub fn to_state(self) -> JobState {
        match self {
            AdminAction::Cancel => JobState::Cancelled,
            AdminAction::Hold => JobState::Held,
            AdminAction::Release | AdminAction::Retry | AdminAction::RunNow => JobState::Available,
        }
    }

    /// The verb, for messages.
    pub fn verb(self) -> &'static str {
        match self {
            AdminAction::Cancel => "cancel",
            AdminAction::Hold => "hold",
            AdminAction::Release => "release",
            AdminAction::Retry => "retry",
            AdminAction::RunNow => "run now",
        }
    }

    /// The `run_at` the action sets at `now` (a release, retry or run-now is due at once), if any.
    pub fn run_at(self, now: i64) -> Option<i64> {
        matches!(
            self,
            AdminAction::Release | AdminAction::Retry | AdminAction::RunNow
        )
        .then_some(now)
    }

    /// Whether the action starts the job's attempts over (a retry).
    pub fn resets_attempts(self) -> bool {
        self == AdminAction::Retry
    }

    /// The `finished_at` the action sets at `now`: when it ends the job.
    pub fn finished_at(self, now: i64) -> Option<i64> {
        self.to_state().is_finished().then_some(now)
    }

    /// What an attempt of the action on job `id` returns, given whether it `changed` the job
    /// and the job as it is now: the job, `JobNotFound`, or `JobStateConflict`.
    pub fn outcome(self, id: i64, changed: bool, job: Option<Job>) -> Result<Job> {
        match job {
            None => Err(crate::Error::JobNotFound { job_id: id }),
            Some(job) if !changed => Err(crate::Error::JobStateConflict {
                job_id: id,
                state: job.state,
                reported: job.reported_state(crate::now_micros()),
                action: self.verb(),
            }),
            Some(job) => Ok(job),
        }
    }
}

/// Jobs claimed in transaction claim mode: their row locks are held by an open transaction
/// that writes nothing to them until it ends, so a claim costs the database a lock per job and
/// no new row version. If the connection drops, the jobs are free at once, as if never claimed
/// (their attempt not counted). While the transaction is open, other sessions see the jobs as
/// they were (`available`) and pass over them.
#[async_trait]
pub trait TxClaim: Send {
    /// The jobs, in claim order; each one's `attempt` is the attempt it runs as, and its lease
    /// token and expiry are those it is given if [`TxFinish::leased`] names it.
    fn jobs(&self) -> &[ClaimedJob];
    /// The jobs, handed to the caller, who will run them: a claim that can gives up its own
    /// (`jobs` is empty afterwards; a finish still names them by id), one that cannot returns a
    /// copy.
    fn take_jobs(&mut self) -> Vec<ClaimedJob> {
        self.jobs().to_vec()
    }
    /// Ends the transaction as `finish` says and commits: the completed jobs completed (by the
    /// retention given), the failed ones failed, the leased ones running on under their lease,
    /// and the claim's other jobs free again as if never claimed. An id that is not one of the
    /// claim's jobs, or named twice, is refused (`OptionInvalid`) before anything is written:
    /// the transaction rolls back and every job is free again.
    async fn finish(self: Box<Self>, finish: TxFinish) -> Result<()>;
    /// Rolls back: the jobs are available again, as if never claimed.
    async fn rollback(self: Box<Self>) -> Result<()>;

    /// The first job (a claim of one job has one).
    fn job(&self) -> &ClaimedJob {
        &self.jobs()[0]
    }
    /// Completes every job of the claim and commits.
    async fn complete(self: Box<Self>, now: i64, retention: Retention) -> Result<()> {
        let completed = self.jobs().iter().map(|j| j.id).collect();
        self.finish(TxFinish {
            completed,
            ..TxFinish::new(now, retention)
        })
        .await
    }
    /// Records a failure of every job of the claim (retry at `retry_at`, or dead when `None`)
    /// and commits.
    async fn fail(self: Box<Self>, now: i64, error: String, retry_at: Option<i64>) -> Result<()> {
        let failed = (self.jobs().iter())
            .map(|j| TxFailure {
                id: j.id,
                error: error.clone(),
                retry_at,
            })
            .collect();
        self.finish(TxFinish {
            failed,
            ..TxFinish::new(now, Retention::Keep)
        })
        .await
    }
}

/// How a [`TxClaim`]'s transaction ends (jobs named nowhere are released).
#[derive(Debug, Clone)]
pub struct TxFinish {
    /// Now.
    pub now: i64,
    /// What a completion does with the row (the queue's retention).
    pub retention: Retention,
    /// Jobs completed.
    pub completed: Vec<i64>,
    /// Jobs failed.
    pub failed: Vec<TxFailure>,
    /// Jobs that run on after the commit, under the lease each was claimed with (completed,
    /// failed and heartbeated as any claimed job).
    pub leased: Vec<i64>,
}

impl TxFinish {
    /// A finish that names no job (each list filled in by the caller).
    pub fn new(now: i64, retention: Retention) -> Self {
        TxFinish {
            now,
            retention,
            completed: vec![],
            failed: vec![],
            leased: vec![],
        }
    }

    /// Every id named, checked against the claim's `jobs`: each one of them, at most once.
    pub fn check(&self, jobs: &[ClaimedJob]) -> Result<()> {
        let mut held: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        held.sort_unstable();
        self.check_ids(&held)
    }

    /// [`check`](Self::check) against the claim's job ids, `held`, sorted.
    pub fn check_ids(&self, held: &[i64]) -> Result<()> {
        let mut named: Vec<i64> = (self.completed.iter().copied())
            .chain(self.failed.iter().map(|f| f.id))
            .chain(self.leased.iter().copied())
            .collect();
        // The first id that is not held, else the first named twice (in sorted order).
        let stranger = named
            .iter()
            .copied()
            .find(|id| held.binary_search(id).is_err());
        let twice = || {
            named.sort_unstable();
            named.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
        };
        match stranger.or_else(twice) {
            Some(id) => Err(crate::Error::OptionInvalid {
                what: "job id in a transaction claim's finish",
                value: id.to_string(),
                expected: "the claim's own jobs, each named once",
            }),
            None => Ok(()),
        }
    }
}

/// A failure recorded by [`TxFinish`].
#[derive(Debug, Clone)]
pub struct TxFailure {
    /// The job.
    pub id: i64,
    /// The error, appended to the job's history.
    pub error: String,
    /// When to retry; `None` makes the job dead.
    pub retry_at: Option<i64>,
}

/// A transaction the caller controls, begun by [`Backend::begin`]: jobs enqueued in it exist
/// only if it commits, and a job completed in it completes in the same commit as the caller's
/// own writes. The caller reaches the driver's connection through [`BackendTx::as_any_mut`]
/// (`backlog::JobTx` does the downcast).
#[async_trait]
pub trait BackendTx: Send + std::any::Any {
    /// Enqueues jobs in the transaction (their queues' rows are created in it too). Values are
    /// validated already.
    async fn enqueue(&mut self, jobs: Vec<NewJob>, now: i64) -> Result<Vec<EnqueueOutcome>>;
    /// Completes jobs in the transaction, fenced by their tokens; returns those completed.
    async fn complete(&mut self, params: &JobCompleteParams) -> Result<Vec<JobRef>>;
    /// Commits.
    async fn commit(self: Box<Self>) -> Result<()>;
    /// Rolls back.
    async fn rollback(self: Box<Self>) -> Result<()>;
    /// The transaction itself, for a downcast to the backend's own type.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

/// Lets code holding a `dyn Backend` reach the concrete backend (a pool, say).
pub trait AsAny: std::any::Any {
    /// `self` as `Any`, for `downcast_ref`.
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: std::any::Any> AsAny for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// One database. Every method is one operation; the conformance suite pins their behaviour.
#[async_trait]
pub trait Backend: AsAny + Send + Sync + std::fmt::Debug + 'static {
    /// What this backend can do.
    fn capabilities(&self) -> Capabilities;
    /// Begins a transaction the caller controls (see [`BackendTx`]). The default: `Unsupported`.
    async fn begin(&self) -> Result<Box<dyn BackendTx>> {
        Err(crate::Error::Unsupported("transactions"))
    }
    /// Creates or upgrades the schema, under a lock; idempotent.
    async fn migrate(&self) -> Result<MigrateReport>;
    /// Inserts jobs in one statement per batch, honouring unique keys.
    async fn job_insert(&self, params: JobInsertParams) -> Result<Vec<EnqueueOutcome>>;
    /// Claims up to `limit` due jobs of a queue that is not paused.
    async fn job_claim(&self, params: &JobClaimParams) -> Result<Vec<ClaimedJob>>;
    /// Claims up to `limit` jobs in transaction claim mode (`None`: none was due).
    async fn job_claim_tx(&self, params: &JobClaimParams) -> Result<Option<Box<dyn TxClaim>>>;
    /// Completes jobs whose token is current; returns the ones completed.
    async fn job_complete(&self, params: JobCompleteParams) -> Result<Vec<JobRef>>;
    /// Completes a worker's finished jobs and claims its next ones, in as few round trips and
    /// commits as the database allows (PostgreSQL: one statement; SQLite: one transaction, one
    /// fsync). The default runs [`Backend::job_complete`] and then [`Backend::job_claim`].
    async fn job_complete_claim(&self, params: JobCompleteClaimParams) -> Result<CompleteClaimed> {
        complete_then_claim(self, params).await
    }
    /// Fails a job (retry or dead); `LeaseLost` if the token is stale.
    async fn job_fail(&self, params: JobFailParams) -> Result<()>;
    /// Puts a running job back to available without consuming an attempt.
    async fn job_release(&self, params: JobReleaseParams) -> Result<()>;
    /// Extends a lease; `LeaseLost` if the token is stale. Returns true when cancellation of
    /// the job was requested (see [`Backend::job_cancel_request`]).
    async fn job_heartbeat(&self, params: JobHeartbeatParams) -> Result<bool>;
    /// Stores progress and/or a result on a running job; `LeaseLost` if the token is stale.
    async fn job_progress(&self, params: JobProgressParams) -> Result<()>;
    /// Asks the worker running a job to stop it (seen at its next heartbeat).
    async fn job_cancel_request(&self, id: i64, now: i64) -> Result<Job>;
    /// Deletes or archives finished jobs of a queue, oldest first, in one bounded batch.
    async fn job_prune(&self, params: JobPruneParams) -> Result<u64>;
    /// Reclaims the dead rows that completions and prunes leave in the job table, where the
    /// database does not do so on its own in time: PostgreSQL runs `VACUUM` on it when its
    /// statistics count enough dead rows (autovacuum may be off, and its default threshold, a
    /// fifth of the table, lets a queue's claim index fill with dead entries). Returns the dead
    /// rows it found when it vacuumed, `None` when it had nothing to do; backends whose engine
    /// reclaims by itself (InnoDB's purge, SQLite's free list) do nothing. When another
    /// session's snapshot keeps the dead rows past the `VACUUM`, PostgreSQL compacts the table
    /// instead ([`JobVacuumParams::compact_max_live`]; `backlog_job_compact()` in docs/sql.md).
    async fn job_vacuum(&self, params: JobVacuumParams) -> Result<Option<JobVacuumed>> {
        let _ = params;
        Ok(None)
    }
    /// Keeps the ring of tables where completed jobs are kept (MySQL/MariaDB, schema version
    /// 17): empties with `TRUNCATE`, never waiting for a lock, each table that completions no
    /// longer write and whose every job finished before `finished_before` (archiving those of
    /// queues whose retention is now `archive`), and turns completions to the next table once
    /// `period` has passed since the last turn and that table is empty. Emptied whole, the jobs
    /// leave nothing that another session's snapshot keeps on disk. Returns how many tables it
    /// emptied. Backends without such a ring do nothing (PostgreSQL's partitions are emptied by
    /// [`Backend::job_vacuum`] once the prune has deleted their rows).
    async fn job_done_turn(&self, params: JobDoneTurnParams) -> Result<u64> {
        let _ = params;
        Ok(0)
    }
    /// The schema version: the last migration applied, 0 on an empty database.
    async fn schema_version(&self) -> Result<i64>;
    /// Per queue, the `run_at` of its oldest due available job (queues with none are left out).
    async fn queue_oldest_due(&self, now: i64) -> Result<Vec<(String, i64)>>;
    /// The oldest transaction another session holds open, where the database keeps row versions
    /// for it (PostgreSQL, MySQL); `None` when there is none, or on an engine without the
    /// problem (SQLite).
    async fn db_oldest_transaction(&self) -> Result<Option<OldestTransaction>> {
        Ok(None)
    }
    /// The database's clock, microseconds since the epoch: the clock its "now" column defaults
    /// read. `None` for a backend without one of its own (an in-memory backend reads the
    /// caller's). Clients measure their offset from it, so that every process reads one time.
    async fn db_now(&self) -> Result<Option<i64>> {
        Ok(None)
    }
    /// Takes or renews the leadership of `name`: returns the term when `holder` leads.
    async fn leader_elect(&self, params: &LeaderParams) -> Result<Option<i64>>;
    /// Gives up the leadership of `name` if `holder` has it.
    async fn leader_resign(&self, name: &str, holder: &str) -> Result<()>;
    /// Writes what the leader runs of periodic schedules (their last tick fired is left as is).
    async fn cron_declare(&self, schedules: &[crate::CronSchedule]) -> Result<()>;
    /// Every periodic schedule, by name.
    async fn cron_list(&self) -> Result<Vec<crate::CronSchedule>>;
    /// Writes a running worker's registration (at its start and every beat).
    async fn worker_beat(&self, worker: &crate::WorkerRegistration) -> Result<()>;
    /// Deletes a worker's registration (it stopped).
    async fn worker_gone(&self, id: &str) -> Result<()>;
    /// Every registered worker, the longest running first (expired ones too).
    async fn worker_list(&self) -> Result<Vec<crate::WorkerRegistration>>;
    /// Deletes the registrations that expired before `before`; how many.
    async fn worker_prune(&self, before: i64) -> Result<u64>;
    /// Enqueues a periodic job for a tick exactly once, however many processes try.
    async fn cron_fire(&self, params: CronFireParams) -> Result<Option<EnqueueOutcome>>;
    /// Subscribes (or unsubscribes) a queue to a topic.
    async fn topic_subscribe(
        &self,
        topic: &QueueName,
        queue: &QueueName,
        subscribe: bool,
        now: i64,
    ) -> Result<()>;
    /// The queues subscribed to a topic.
    async fn topic_subscribers(&self, topic: &QueueName) -> Result<Vec<QueueName>>;
    /// Starts delivering wake-ups (a queue name per batch of new jobs) to `wake`, from one shared
    /// connection that reconnects by itself. Returns false when the backend has no such channel
    /// (workers then poll).
    async fn listen(&self, wake: WakeFn) -> Result<bool> {
        let _ = wake;
        Ok(false)
    }
    /// Makes running jobs whose lease expired available again (or dead when out of attempts);
    /// one entry per job rescued.
    async fn job_rescue(&self, params: JobRescueParams) -> Result<Vec<Rescued>>;
    /// One job by id.
    async fn job_get(&self, id: i64) -> Result<Option<Job>>;
    /// Makes the next waiting jobs of these ordered groups available, where their group has
    /// room; returns how many. Idempotent: a group without room, or without a due waiting job,
    /// is left as it is.
    async fn group_promote(&self, params: GroupPromoteParams) -> Result<u64>;
    /// Promotes in every group that has a due waiting job and room for it (the leader's sweep,
    /// for promotions a finished job did not make: a crash, an operator's action, a job that came
    /// due); returns how many jobs were made available.
    async fn group_sweep(&self, now: i64) -> Result<u64>;
    /// What flow control holds in a queue now: jobs running, jobs waiting for their group, and
    /// the groups a failed job holds.
    async fn queue_flow(&self, queue: &QueueName, now: i64) -> Result<QueueFlow>;
    /// Jobs by queue and state, by id.
    async fn job_list(&self, params: JobListParams) -> Result<Vec<Job>>;
    /// An operator's action on a job that is not running.
    async fn job_admin(&self, id: i64, action: AdminAction, now: i64) -> Result<Job>;
    /// Deletes a job that is not running, wherever it is kept (the job table, the completed
    /// jobs kept apart, the archive), and returns it as it was. `JobNotFound` when there is
    /// none, `JobStateConflict` when it is running (cancel it first). A unique key it held is
    /// free at once; an ordered group it held goes on at the leader's next sweep.
    async fn job_delete(&self, id: i64, now: i64) -> Result<Job>;
    /// Jobs of the queues and kinds that are available (due, scheduled or waiting to retry) or
    /// running: what a worker of those queues and kinds has left to do.
    async fn job_count_pending(&self, params: &JobCountPendingParams) -> Result<i64>;
    /// Moves a queue's dead jobs back to available.
    async fn queue_redrive(&self, params: QueueRedriveParams) -> Result<u64>;
    /// A queue's stored settings.
    async fn queue_get(&self, name: &QueueName) -> Result<Option<QueueSettings>>;
    /// Creates a queue with default settings unless it exists.
    async fn queue_ensure(&self, name: &QueueName, now: i64) -> Result<()>;
    /// Stores a queue's settings (creating the queue if new).
    async fn queue_upsert(&self, settings: &QueueSettings, now: i64) -> Result<()>;
    /// Pauses or resumes a queue (creating it if new).
    async fn queue_set_paused(&self, name: &QueueName, paused: bool, now: i64) -> Result<()>;
    /// Every known queue: with settings, or with jobs.
    async fn queue_list(&self) -> Result<Vec<QueueInfo>>;
    /// Job counts per queue and reported state, as the database keeps them (SQL backends,
    /// schema version 19: `backlog_count`, read in O(queues) whatever the jobs).
    async fn queue_stats(
        &self,
        queue: Option<&QueueName>,
        now: i64,
    ) -> Result<Vec<(String, QueueStats)>>;
    /// The counts of [`Backend::queue_stats`] taken by a scan of every job instead: what the kept
    /// counts must equal, to check them. Costs a read of the whole job table.
    async fn queue_stats_scan(
        &self,
        queue: Option<&QueueName>,
        now: i64,
    ) -> Result<Vec<(String, QueueStats)>> {
        self.queue_stats(queue, now).await
    }
    /// Folds the kept counts (the leader, every few seconds): the rows that writers added since
    /// the last fold into one per key, and keys of jobs due later whose time has come into
    /// `available`, so that reading them stays O(queues). Returns how many rows or slots it
    /// folded; backends that keep no counts do nothing.
    async fn count_fold(&self, now: i64) -> Result<u64> {
        let _ = now;
        Ok(0)
    }
    /// Adds counts to `backlog_stat`, each row to its queue and minute (depth is not written).
    async fn stat_add(&self, rows: &[StatRow]) -> Result<()>;
    /// Stores each queue's depth in its row of `minute`.
    async fn stat_snapshot(&self, minute: i64, depths: &[(String, StatDepth)]) -> Result<()>;
    /// The rows of minutes from `since` on (of one queue, or of all), oldest first.
    async fn stat_history(&self, queue: Option<&QueueName>, since: i64) -> Result<Vec<StatRow>>;
    /// Per queue, the sums over every row (its minute is 0, its depth `None`).
    async fn stat_totals(&self) -> Result<Vec<StatRow>>;
    /// Folds the rows of minutes before `before` into each queue's row of minute 0 and deletes
    /// them, in one transaction (the totals do not change); returns the rows removed.
    async fn stat_prune(&self, before: i64) -> Result<u64>;
    /// Records an operator's action; returns its id.
    async fn audit_add(&self, entry: &AuditEntry) -> Result<i64>;
    /// Recorded actions, newest first.
    async fn audit_list(&self, params: &AuditListParams) -> Result<Vec<AuditEntry>>;
    /// Closes the pool.
    async fn close(&self);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(f: &TxFinish, held: &[i64]) -> Option<String> {
        match f.check_ids(held) {
            Err(crate::Error::OptionInvalid { value, .. }) => Some(value),
            Err(e) => panic!("{e}"),
            Ok(()) => None,
        }
    }

    #[test]
    fn a_finish_names_the_claims_jobs_each_once() {
        let held = [3, 5, 9];
        let mut f = TxFinish::new(0, Retention::Delete);
        assert_eq!(refused(&f, &held), None, "naming none is fine");
        f.completed = vec![9, 3];
        f.leased = vec![5];
        assert_eq!(refused(&f, &held), None);
        f.failed.push(TxFailure {
            id: 4,
            error: "x".into(),
            retry_at: None,
        });
        assert_eq!(refused(&f, &held).as_deref(), Some("4"), "not the claim's");
        f.failed[0].id = 3;
        assert_eq!(refused(&f, &held).as_deref(), Some("3"), "named twice");
        f.failed.clear();
        f.leased = vec![5, 5];
        assert_eq!(refused(&f, &held).as_deref(), Some("5"), "leased twice");
    }
}
