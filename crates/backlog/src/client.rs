//! The client: everything an application or the `backlog` command does with a queue.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backlog_sql::{JobConnection, JobTx, SqlBackend};

use crate::time::{ClockSync, Time, TimeSource};
use backlog_core::{
    AdminAction, Backend, ClaimStrategy, ClaimedJob, Clock, CompleteClaimed, EnqueueOutcome, Error,
    GroupPromoteParams, Job, JobClaimParams, JobCompleteClaimParams, JobCompleteParams,
    JobCountPendingParams, JobFailParams, JobHeartbeatParams, JobInsertParams, JobListParams,
    JobProgressParams, JobRef, JobReleaseParams, JobRescueParams, JobState, Kind, MigrateReport,
    NewJob, Payload, QueueInfo, QueueName, QueueRedriveParams, QueueSettings, QueueStats, Result,
    StateFilter, SystemClock, TxClaim, TxFinish, backoff_delay,
};

/// How long queue settings are cached in a process.
const SETTINGS_TTL: Duration = Duration::from_secs(2);
/// How often (by the client's clock) a claimer also rescues expired leases.
const RESCUE_EVERY_US: i64 = 1_000_000;
/// Most expired leases rescued per pass.
const RESCUE_BATCH: u32 = 1000;

/// What a claim asks for.
#[derive(Debug, Clone)]
pub struct ClaimOpts {
    queue: QueueName,
    kinds: Vec<Kind>,
    limit: u32,
    owner: String,
    lease: Option<Duration>,
    strategy: Option<ClaimStrategy>,
}

impl ClaimOpts {
    /// Claim from `queue` (validated), one job, with the queue's lease and the default strategy.
    pub fn new(queue: &str) -> Result<Self> {
        Ok(Self::for_queue(QueueName::new(queue)?))
    }

    /// [`ClaimOpts::new`] for a queue name validated already.
    pub(crate) fn for_queue(queue: QueueName) -> Self {
        ClaimOpts {
            queue,
            kinds: vec![],
            limit: 1,
            owner: default_owner(),
            lease: None,
            strategy: None,
        }
    }

    /// At most this many jobs (1 to 10,000).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit.clamp(1, 10_000);
        self
    }

    /// Only jobs of these kinds.
    pub fn kinds(mut self, kinds: Vec<Kind>) -> Self {
        self.kinds = kinds;
        self
    }

    /// The lease owner recorded on the jobs (default: host name and process id).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }

    /// Lease length (default: the queue's setting).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Claim strategy (default: the backend's best).
    pub fn strategy(mut self, strategy: ClaimStrategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// The queue.
    pub fn queue(&self) -> &QueueName {
        &self.queue
    }
}

/// Which jobs [`Client::job_list`] returns: every filter that is set applies.
#[derive(Debug, Clone, Default)]
pub struct JobListOpts {
    /// Only this queue.
    pub queue: Option<QueueName>,
    /// Only this state.
    pub state: Option<StateFilter>,
    /// Only this kind.
    pub kind: Option<Kind>,
    /// Only jobs with this unique key.
    pub unique_key: Option<backlog_core::UniqueKey>,
    /// Only ids greater than this (the last id of the previous page).
    pub after_id: i64,
    /// At most this many.
    pub limit: u32,
}

/// Jobs a bulk action pages through at a time ([`Client::bulk`]).
pub const BULK_PAGE: u32 = 1_000;
/// Jobs of a bulk action in flight at once, each its own short statement on a connection of
/// the pool: a million jobs take minutes, not a quarter of an hour, and the pool keeps
/// connections for the workers beside it.
pub const BULK_IN_FLIGHT: usize = 4;
/// The most job ids one bulk action names; more are taken by a filter.
pub const BULK_MAX_IDS: usize = 10_000;

/// The jobs a bulk action takes ([`Client::bulk`]).
#[derive(Debug, Clone)]
pub enum JobSelection {
    /// These jobs (1 to [`BULK_MAX_IDS`]).
    Ids(Vec<i64>),
    /// Every job of a queue that the filter matches, as listed when the action reaches it.
    Filter(JobFilter),
}

/// Which jobs of a queue a bulk action takes.
#[derive(Debug, Clone)]
pub struct JobFilter {
    /// The queue.
    pub queue: QueueName,
    /// Only this state.
    pub state: Option<StateFilter>,
    /// Only this kind.
    pub kind: Option<Kind>,
    /// Only jobs created before this time (µs since the epoch): older than an age.
    pub created_before: Option<i64>,
}

/// What a bulk action does to each job ([`Client::bulk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkAction {
    /// An operator's action, as its one-job call makes it.
    Admin(AdminAction),
    /// Deletes the job ([`Client::delete`]); running jobs are passed over.
    Delete,
}

impl From<AdminAction> for BulkAction {
    fn from(a: AdminAction) -> Self {
        BulkAction::Admin(a)
    }
}

impl std::str::FromStr for BulkAction {
    type Err = Error;

    /// `retry`, `cancel`, `hold`, `release`, `run_now` (or `run-now`) or `delete`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "delete" => Ok(BulkAction::Delete),
            _ => s
                .parse()
                .map(BulkAction::Admin)
                .map_err(|_| Error::OptionInvalid {
                    what: "action",
                    value: s.to_owned(),
                    expected: "retry, cancel, hold, release, run_now, delete",
                }),
        }
    }
}

/// How far a bulk action got ([`Client::bulk`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BulkProgress {
    /// Jobs the selection took so far.
    pub seen: u64,
    /// Jobs the action changed (the others were in a state it does not apply to, or gone).
    pub changed: u64,
}

/// The default lease owner: `host:pid`.
pub fn default_owner() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// What a failure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOutcome {
    /// The job will run again at this time (microseconds since the epoch).
    Retry {
        /// When.
        at: i64,
    },
    /// Attempts are exhausted, or the job was discarded: it is dead.
    Dead,
    /// The job ends cancelled (a handler's cancel outcome).
    Cancelled,
}

/// What a heartbeat learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// The new lease expiry.
    pub lease_expires_at: i64,
    /// Someone asked for the job to be cancelled.
    pub cancel_requested: bool,
}

/// A connection to one queue database. Cheap to share behind an `Arc`; all methods take `&self`.
#[derive(Debug)]
pub struct Client {
    backend: Arc<dyn Backend>,
    time: Arc<Time>,
    payload_limit: usize,
    settings: Mutex<HashMap<QueueName, (QueueSettings, Instant)>>,
    ensured: Mutex<HashSet<QueueName>>,
    /// Queues whose last complete-and-claim took as many jobs as it asked for.
    busy: Mutex<HashSet<QueueName>>,
    /// The queue `new_job` named last: jobs made in a loop share one name, checked once.
    last_queue: Mutex<Option<QueueName>>,
    last_rescue: AtomicI64,
    /// Counts not yet added to `backlog_stat`.
    stats: Arc<crate::stats::Recorder>,
    wakers: Arc<Wakers>,
    listening: tokio::sync::OnceCell<bool>,
    /// Single enqueues made at the same time, sharing an insert.
    coalescer: crate::coalesce::Coalescer,
    /// How many `enqueue_many` calls may hold a pool connection at once: fewer than the pool
    /// has, so that the process's workers always find one for their claims and completions
    /// (`None`: no gate, for a pool too small to split or a backend without one).
    producers: Option<Arc<tokio::sync::Semaphore>>,
}

/// Of a pool of `max` connections, how many batched enqueues may use at once: all but a quarter
/// (1 to 4 kept back). Producers that outnumber the pool otherwise hold every connection and the
/// claim loops of a worker in the same process queue behind them: with 64 producers on a pool
/// of 16, a worker completed 300 jobs in the 10 s it took them to enqueue 709,000. `None` below
/// 4 connections (SQLite's single writer among them).
pub(crate) fn producer_slots(max: u32) -> Option<usize> {
    (max >= 4).then(|| (max - (max / 4).clamp(1, 4)) as usize)
}

/// One `Notify` per queue: workers of this process wait on them, enqueues and the database's
/// notifications wake them.
#[derive(Debug, Default)]
pub(crate) struct Wakers {
    by_queue: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
}

impl Wakers {
    /// The notifier of a queue.
    pub(crate) fn get(&self, queue: &str) -> Arc<tokio::sync::Notify> {
        self.by_queue
            .lock()
            .expect("lock")
            .entry(queue.to_owned())
            .or_default()
            .clone()
    }

    /// Wakes the workers of a queue (if any wait; otherwise the next wait returns at once).
    pub(crate) fn wake(&self, queue: &str) {
        let n = self.by_queue.lock().expect("lock").get(queue).cloned();
        if let Some(n) = n {
            n.notify_waiters();
            n.notify_one();
        }
    }
}

impl Client {
    /// Connects to `sqlite://PATH`, `postgres://…` or `mysql://…`.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, &backlog_sql::BackendConfig::default()).await
    }

    /// Connects with pool settings.
    pub async fn connect_with(url: &str, config: &backlog_sql::BackendConfig) -> Result<Self> {
        let client = Self::from_backend(backlog_sql::connect(url, config).await?);
        client.sync_clock().await?;
        Ok(client)
    }

    /// Uses one of the built-in backends, for example made from your own sqlx pool:
    /// `Client::from_sql(SqlBackend::Postgres(PgBackend::from_pool(pool)))`.
    pub fn from_sql(sql: SqlBackend) -> Self {
        Self::from_backend(sql.backend())
    }

    /// Wraps a backend: a built-in one made from your own sqlx pool, or your own (an in-memory
    /// one for tests, say).
    pub fn from_backend(backend: Arc<dyn Backend>) -> Self {
        let pool_size = match SqlBackend::of(backend.as_ref()) {
            Some(SqlBackend::Postgres(b)) => Some(b.pool().options().get_max_connections()),
            Some(SqlBackend::MySql(b)) => Some(b.pool().options().get_max_connections()),
            Some(SqlBackend::Sqlite(_)) | None => None,
        };
        let producers = pool_size
            .and_then(producer_slots)
            .map(|n| Arc::new(tokio::sync::Semaphore::new(n)));
        Client {
            backend,
            time: Arc::new(Time::new(Arc::new(SystemClock), TimeSource::Database)),
            payload_limit: backlog_core::DEFAULT_PAYLOAD_LIMIT,
            settings: Mutex::new(HashMap::new()),
            ensured: Mutex::new(HashSet::new()),
            busy: Mutex::new(HashSet::new()),
            last_queue: Mutex::new(None),
            last_rescue: AtomicI64::new(i64::MIN),
            stats: Arc::default(),
            wakers: Arc::new(Wakers::default()),
            listening: tokio::sync::OnceCell::new(),
            coalescer: Default::default(),
            producers,
        }
    }

    /// The built-in backend, when the client's backend is one (to reach its pool, say).
    pub fn sql(&self) -> Option<SqlBackend> {
        SqlBackend::of(self.backend.as_ref())
    }

    /// Begins a transaction on the queue database: do your own writes on it, enqueue inside it
    /// ([`JobTx::enqueue`]), or complete a job in the same commit ([`JobTx::complete`]).
    /// `Unsupported` on a backend without transactions.
    pub async fn begin(&self) -> Result<JobTx> {
        JobTx::begin(self.backend.as_ref()).await
    }

    /// Enqueues jobs inside a transaction the caller controls (any sqlx connection or
    /// transaction of the queue database: `&mut *tx`). The jobs exist only if it commits.
    pub async fn enqueue_in<C: JobConnection>(
        &self,
        conn: &mut C,
        mut jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        for job in &jobs {
            check_new_job(job, self.payload_limit)?;
        }
        crate::trace::stamp(&mut jobs);
        // Behind a transaction pooler, backlog's statements on the caller's connection are
        // unnamed too.
        let pooled =
            matches!(self.sql(), Some(SqlBackend::Postgres(pg)) if pg.transaction_pooler());
        backlog_sql::unnamed_statements(pooled, conn.backlog_enqueue(jobs, self.now())).await
    }

    pub(crate) fn wakers(&self) -> &Arc<Wakers> {
        &self.wakers
    }

    /// Starts the database's wake-up channel once per client (PostgreSQL LISTEN/NOTIFY on one
    /// shared connection); returns whether there is one. Workers poll either way, as a fallback.
    pub async fn listen(&self) -> Result<bool> {
        let wakers = self.wakers.clone();
        let backend = self.backend.clone();
        self.listening
            .get_or_try_init(|| async move {
                backend
                    .listen(Arc::new(move |queue: &str| wakers.wake(queue)))
                    .await
            })
            .await
            .copied()
    }

    /// Uses another clock, as it is: tests advance a [`backlog_core::ManualClock`] instead of
    /// sleeping. The time source becomes [`TimeSource::Local`] (the database's clock is not
    /// consulted); follow with [`Client::with_time_source`] to measure the offset from this clock
    /// instead.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.time = Arc::new(Time::new(clock, TimeSource::Local));
        self
    }

    /// Sets where "now" comes from: the database's clock (the default) or the client's own.
    /// The offset is measured again at the next [`Client::sync_clock`], or within a minute.
    pub fn with_time_source(mut self, source: TimeSource) -> Self {
        self.time = Arc::new(Time::new(self.time.clock(), source));
        self
    }

    /// Measures the offset between the database's clock and the client's now (the client does
    /// it when it connects, each worker when it starts, and both every minute after). `None`
    /// when the time source is [`TimeSource::Local`] or the backend has no clock of its own.
    pub async fn sync_clock(&self) -> Result<Option<ClockSync>> {
        self.time.sync(self.backend.as_ref()).await
    }

    /// The database's clock minus the client's, in microseconds, as last measured (0 before the
    /// first measurement and with [`TimeSource::Local`]).
    pub fn clock_offset(&self) -> i64 {
        self.time.offset()
    }

    /// Where "now" comes from.
    pub fn time_source(&self) -> TimeSource {
        self.time.source()
    }

    /// Bounds every call to the database (see `BackendConfig::statement_timeout`, which
    /// [`Client::connect_with`] applies): for a client made from your own pool with
    /// [`Client::from_sql`]. `None` takes the bound away.
    pub fn with_statement_timeout(mut self, limit: Option<Duration>) -> Self {
        let inner = backlog_sql::Deadline::unwrap(&self.backend).clone();
        self.backend = backlog_sql::Deadline::wrap(inner, limit);
        self
    }

    /// Sets the largest accepted payload in bytes (default 1 MiB).
    pub fn with_payload_limit(mut self, limit: usize) -> Self {
        self.payload_limit = limit;
        self
    }

    /// The largest accepted payload in bytes.
    pub fn payload_limit(&self) -> usize {
        self.payload_limit
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Now, in microseconds since the epoch: by the database's clock (the client's clock plus
    /// the measured offset), or by the client's own with [`TimeSource::Local`].
    pub fn now(&self) -> i64 {
        self.time.resync_if_due(&self.backend);
        self.time.now()
    }

    /// Creates or upgrades the schema (idempotent, safe from several processes at once).
    pub async fn migrate(&self) -> Result<MigrateReport> {
        self.backend.migrate().await
    }

    /// A job for `queue` whose payload is `payload` serialized as JSON (validated).
    pub fn new_job<T: serde::Serialize + ?Sized>(
        &self,
        queue: &str,
        payload: &T,
    ) -> Result<NewJob> {
        let queue = self.queue_name(queue)?;
        Ok(NewJob::new(
            queue,
            Payload::from_value(payload, self.payload_limit)?,
        ))
    }

    /// A validated queue name, shared with the jobs made before it for the same queue.
    fn queue_name(&self, queue: &str) -> Result<QueueName> {
        let mut last = self.last_queue.lock().expect("lock");
        match &*last {
            Some(q) if q.as_str() == queue => Ok(q.clone()),
            _ => {
                let q = QueueName::new(queue)?;
                *last = Some(q.clone());
                Ok(q)
            }
        }
    }

    /// Parses JSON text as a payload, with this client's size limit.
    pub fn payload(&self, text: impl Into<String>) -> Result<Payload> {
        Payload::parse(text, self.payload_limit)
    }

    /// Enqueues one job. With a unique key that an unfinished job holds, returns that job's id
    /// and creates nothing.
    ///
    /// An error for a lost connection (`is_transient()`) does not say that nothing was
    /// committed: the answer may have been lost after the commit. To retry without a duplicate,
    /// give the job a unique key and, before enqueueing it again, look the key up in any state
    /// ([`Client::job_list`] with `unique_key`): the key alone stops a second job only while the
    /// first is unfinished, and it may have been completed meanwhile.
    ///
    /// Calls made at the same time (from many tasks) share one statement and one commit: each
    /// returns once the commit that holds its job is done, with its own outcome or error.
    pub async fn enqueue(&self, mut job: NewJob) -> Result<EnqueueOutcome> {
        self.ready(std::slice::from_mut(&mut job)).await?;
        let queue = job.queue.clone();
        let out = (self.coalescer)
            .enqueue(&self.backend, job, || self.now())
            .await?;
        // Workers of this process wake at once.
        self.wakers.wake(queue.as_str());
        if out.created {
            self.record(queue.as_str(), self.now(), |c| c.enqueued += 1);
        }
        Ok(out)
    }

    /// Enqueues jobs in one transaction, one multi-row statement per chunk; outcomes in order.
    /// On a pool of 4 or more connections, concurrent calls use at most three quarters of it (a
    /// quarter kept back, 1 to 4): more producers than that wait their turn, and a worker of the
    /// same client still finds a connection for its claims and completions.
    pub async fn enqueue_many(&self, mut jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        if jobs.is_empty() {
            return Ok(vec![]);
        }
        let queues = self.ready(&mut jobs).await?;
        let runs = queue_runs(&jobs);
        // A connection of the producers' share of the pool (`producer_slots`).
        let slot = match &self.producers {
            Some(gate) => Some(gate.acquire().await.expect("the gate is never closed")),
            None => None,
        };
        let now = self.now();
        let out = self
            .backend
            .job_insert(JobInsertParams { jobs, now })
            .await?;
        drop(slot);
        // Workers of this process wake at once.
        for q in &queues {
            self.wakers.wake(q.as_str());
        }
        for (queue, range) in runs {
            let created = out[range].iter().filter(|o| o.created).count() as i64;
            if created > 0 {
                self.record(queue.as_str(), now, |c| c.enqueued += created);
            }
        }
        Ok(out)
    }

    /// Makes jobs ready to insert: each checked, stamped with the current trace context, and
    /// its queue's row created if new; the distinct queues.
    async fn ready(&self, jobs: &mut [NewJob]) -> Result<Vec<QueueName>> {
        for job in jobs.iter() {
            check_new_job(job, self.payload_limit)?;
        }
        crate::trace::stamp(jobs);
        let queues: Vec<QueueName> = NewJob::queues_of(jobs).into_iter().cloned().collect();
        self.ensure_queues(&queues).await?;
        Ok(queues)
    }

    /// Creates the queue rows of queues seen for the first time (queues are created on first use);
    /// `queues` are distinct ([`NewJob::queues_of`]).
    async fn ensure_queues(&self, queues: &[QueueName]) -> Result<()> {
        let new: Vec<QueueName> = {
            let known = self.ensured.lock().expect("lock");
            queues
                .iter()
                .filter(|q| !known.contains(*q))
                .cloned()
                .collect()
        };
        for q in new {
            self.backend.queue_ensure(&q, self.now()).await?;
            self.ensured.lock().expect("lock").insert(q);
        }
        Ok(())
    }

    /// A queue's settings (defaults for a queue never configured); cached for two seconds.
    pub async fn queue_settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        if let Some((s, at)) = self.settings.lock().expect("lock").get(queue)
            && at.elapsed() < SETTINGS_TTL
        {
            return Ok(s.clone());
        }
        let s = self
            .backend
            .queue_get(queue)
            .await?
            .unwrap_or_else(|| QueueSettings::defaults(queue.clone()));
        self.settings
            .lock()
            .expect("lock")
            .insert(queue.clone(), (s.clone(), Instant::now()));
        Ok(s)
    }

    /// Rescues expired leases if this process has not looked in the last second: any claimer
    /// recovers the jobs of a dead worker, with no other process needed.
    pub async fn rescue_if_due(&self) -> Result<u64> {
        let now = self.now();
        let last = self.last_rescue.load(AtomicOrdering::Relaxed);
        if last != i64::MIN && now - last < RESCUE_EVERY_US {
            return Ok(0);
        }
        if self
            .last_rescue
            .compare_exchange(last, now, AtomicOrdering::SeqCst, AtomicOrdering::Relaxed)
            .is_err()
        {
            return Ok(0);
        }
        self.rescue().await
    }

    /// Rescues expired leases now (up to 1,000 jobs), and promotes in the ordered groups that
    /// have room for a due waiting job.
    pub async fn rescue(&self) -> Result<u64> {
        let now = self.now();
        let rescued = self
            .backend
            .job_rescue(JobRescueParams {
                now,
                limit: RESCUE_BATCH,
            })
            .await?;
        for r in &rescued {
            self.record(&r.queue, now, |c| {
                c.rescued += 1;
                c.dead += i64::from(r.dead);
            });
        }
        // With the rescue, whose dead jobs leave their group's running set: the ordered groups
        // whose next job no finished job promoted (see `Backend::group_sweep`). The rescue
        // stands when the sweep fails; the next pass sweeps again.
        if let Err(e) = self.backend.group_sweep(now).await {
            tracing::warn!(error = %e, "sweeping ordered groups failed; the next rescue pass will");
        }
        Ok(rescued.len() as u64)
    }

    fn claim_params(&self, opts: &ClaimOpts, settings: &QueueSettings) -> JobClaimParams {
        JobClaimParams {
            queue: opts.queue.clone(),
            kinds: opts.kinds.clone(),
            limit: opts.limit,
            owner: opts.owner.clone(),
            lease: opts.lease.unwrap_or(settings.lease),
            now: self.now(),
            order: settings.order,
            strategy: opts
                .strategy
                .unwrap_or_else(|| self.backend.capabilities().default_strategy()),
            global_limit: settings.global_concurrency.is_some()
                || settings.rate_limit.is_some()
                || settings.group_rate_limit.is_some(),
        }
    }

    /// Lets the next jobs of the ordered groups of `finished` run, now that these left their
    /// group's running set (completed, failed, dead). A promotion that fails is only logged:
    /// the jobs finished, and the leader's sweep promotes what a finished job did not.
    pub(crate) async fn promote_after(&self, finished: &[ClaimedJob]) {
        let mut by_queue: HashMap<&str, Vec<String>> = HashMap::new();
        for j in finished {
            if let Some(g) = &j.group {
                by_queue.entry(&j.queue).or_default().push(g.clone());
            }
        }
        for (queue, groups) in by_queue {
            let Ok(queue) = QueueName::new(queue) else {
                continue;
            };
            let now = self.now();
            let name = queue.as_str().to_owned();
            let params = GroupPromoteParams { queue, groups, now };
            match self.backend.group_promote(params).await {
                // The promoted jobs are new work: this process's workers take them at once.
                Ok(n) if n > 0 => self.wakers.wake(&name),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "promoting in ordered groups failed; the sweep will")
                }
            }
        }
    }

    /// Claims up to `opts.limit` due jobs (never from a paused queue), each with a fresh lease.
    pub async fn claim(&self, opts: &ClaimOpts) -> Result<Vec<ClaimedJob>> {
        self.rescue_if_due().await?;
        let settings = self.queue_settings(&opts.queue).await?;
        let claimed = self
            .backend
            .job_claim(&self.claim_params(opts, &settings))
            .await?;
        self.record_started(&opts.queue, &claimed);
        Ok(claimed)
    }

    /// Completes a worker's finished jobs of `opts.queue` and claims the next ones, in one
    /// statement or transaction where the backend can (see [`Backend::job_complete_claim`]):
    /// a worker that drains a queue pays one round trip and one commit per batch, not two.
    /// Every job in `finished` must belong to `opts.queue`.
    pub async fn complete_claim(
        &self,
        finished: &[ClaimedJob],
        opts: &ClaimOpts,
    ) -> Result<CompleteClaimed> {
        if let Some(j) = finished.iter().find(|j| j.queue != opts.queue.as_str()) {
            return Err(Error::JobQueueMismatch {
                job_id: j.id,
                queue: j.queue.clone(),
                expected: opts.queue.as_str().to_owned(),
            });
        }
        self.rescue_if_due().await?;
        let settings = self.queue_settings(&opts.queue).await?;
        let claim = self.claim_params(opts, &settings);
        let limit = claim.limit as usize;
        let expect_jobs = self.busy.lock().expect("lock").contains(&opts.queue);
        let groups: Vec<String> = finished.iter().filter_map(|j| j.group.clone()).collect();
        let r = self
            .backend
            .job_complete_claim(JobCompleteClaimParams {
                complete: JobCompleteParams {
                    jobs: finished.iter().map(ClaimedJob::job_ref).collect(),
                    now: claim.now,
                    retention: settings.retention,
                },
                claim,
                expect_jobs,
                groups,
            })
            .await?;
        if !r.completed.is_empty() {
            let n = r.completed.len() as i64;
            self.record(opts.queue.as_str(), self.now(), |c| c.completed += n);
        }
        // Jobs of the finished jobs' groups were promoted with the completion: new work for
        // this process's workers.
        if r.promoted > 0 {
            self.wakers.wake(opts.queue.as_str());
        }
        if let Ok(claimed) = &r.claimed {
            self.record_started(&opts.queue, claimed);
        }
        let full = matches!(&r.claimed, Ok(c) if c.len() >= limit);
        if full != expect_jobs {
            let mut busy = self.busy.lock().expect("lock");
            match full {
                true => busy.insert(opts.queue.clone()),
                false => busy.remove(&opts.queue),
            };
        }
        Ok(r)
    }

    /// Claims one job in transaction claim mode: its row stays locked by an open transaction
    /// while it runs, and a dropped connection frees it at once (PostgreSQL, MySQL/MariaDB).
    pub async fn claim_tx(&self, opts: &ClaimOpts) -> Result<Option<Box<dyn TxClaim>>> {
        let settings = self.queue_settings(&opts.queue).await?;
        let mut p = self.claim_params(opts, &settings);
        p.limit = 1;
        let claim = self.backend.job_claim_tx(&p).await?;
        if let Some(c) = &claim {
            self.record_started(&opts.queue, std::slice::from_ref(c.job()));
        }
        Ok(claim)
    }

    /// Claims up to `opts`' limit of jobs in transaction claim mode, in one transaction that
    /// holds their row locks and writes nothing to them until [`TxClaim::finish`] completes,
    /// fails or leases each (the others are let go, as if never claimed). A claim costs the
    /// database a lock per job and no new row version, so a batch of short jobs finished in one
    /// commit is the cheapest way through a queue (PostgreSQL, MySQL/MariaDB). A dropped
    /// connection frees the jobs at once, with no attempt counted.
    pub async fn claim_tx_many(&self, opts: &ClaimOpts) -> Result<Option<Box<dyn TxClaim>>> {
        let claim = self.claim_tx_uncounted(opts).await?;
        if let Some(c) = &claim {
            self.record_started(&opts.queue, c.jobs());
        }
        Ok(claim)
    }

    /// [`Client::claim_tx_many`] without counting its jobs as started: a worker's claim may
    /// hold more jobs than it has free slots, and counts only those it starts, once its
    /// transaction commits ([`Client::record_starts`]).
    pub(crate) async fn claim_tx_uncounted(
        &self,
        opts: &ClaimOpts,
    ) -> Result<Option<Box<dyn TxClaim>>> {
        self.rescue_if_due().await?;
        let settings = self.queue_settings(&opts.queue).await?;
        let p = self.claim_params(opts, &settings);
        self.backend.job_claim_tx(&p).await
    }

    /// Ends a transaction claim of `queue` ([`TxClaim::finish`]), counting its completions.
    pub(crate) async fn finish_tx(
        &self,
        queue: &str,
        claim: Box<dyn TxClaim>,
        finish: TxFinish,
    ) -> Result<()> {
        let n = finish.completed.len() as i64;
        claim.finish(finish).await?;
        if n > 0 {
            self.record(queue, self.now(), |c| c.completed += n);
        }
        Ok(())
    }

    /// Completes a job, fenced by its lease token (`LeaseLost` if the lease is gone).
    pub async fn complete(&self, job: &ClaimedJob) -> Result<()> {
        let done = self.complete_many(std::slice::from_ref(job)).await?;
        if done.is_empty() {
            return Err(Error::LeaseLost { job_id: job.id });
        }
        Ok(())
    }

    /// Completes jobs in as few statements as their queues' retention settings allow; returns
    /// the ones completed (the others had lost their lease).
    pub async fn complete_many(&self, jobs: &[ClaimedJob]) -> Result<Vec<JobRef>> {
        let mut by_queue: HashMap<&str, Vec<JobRef>> = HashMap::new();
        for j in jobs {
            by_queue.entry(&j.queue).or_default().push(j.job_ref());
        }
        let mut done = vec![];
        for (queue, refs) in by_queue {
            let settings = self.queue_settings(&QueueName::new(queue)?).await?;
            let now = self.now();
            let completed = self
                .backend
                .job_complete(JobCompleteParams {
                    jobs: refs,
                    now,
                    retention: settings.retention,
                })
                .await?;
            let n = completed.len() as i64;
            self.record(queue, now, |c| c.completed += n);
            done.extend(completed);
        }
        self.promote_after(jobs).await;
        Ok(done)
    }

    /// Completes jobs of one queue by their (id, token) pairs, as a worker that kept only those
    /// (the HTTP worker protocol) reports them; returns the ones completed (the others had lost
    /// their lease). The queue's retention applies: every job must belong to `queue`.
    pub async fn complete_refs(&self, queue: &QueueName, jobs: Vec<JobRef>) -> Result<Vec<JobRef>> {
        if jobs.is_empty() {
            return Ok(vec![]);
        }
        let settings = self.queue_settings(queue).await?;
        let now = self.now();
        let done = self
            .backend
            .job_complete(JobCompleteParams {
                jobs,
                now,
                retention: settings.retention,
            })
            .await?;
        let n = done.len() as i64;
        self.record(queue.as_str(), now, |c| c.completed += n);
        Ok(done)
    }

    /// Records a failed attempt: retry after capped exponential backoff with jitter, or dead when
    /// the job's attempts are exhausted. Fenced by the lease token.
    pub async fn fail(&self, job: &ClaimedJob, error: &str) -> Result<FailOutcome> {
        self.fail_retry(job, error, None).await
    }

    /// Records a failed attempt: dead when it was the job's last (by its own limit, or else its
    /// queue's), otherwise a retry after `after`, or after the queue's backoff when `None`.
    pub(crate) async fn fail_retry(
        &self,
        job: &ClaimedJob,
        error: &str,
        after: Option<Duration>,
    ) -> Result<FailOutcome> {
        let settings = self.queue_settings(&QueueName::new(&job.queue)?).await?;
        let outcome = fail_outcome(job, &settings, self.now(), after);
        self.fail_with(job, error, outcome).await?;
        Ok(outcome)
    }

    /// Records a failed attempt with an explicit outcome (retry at a time, or dead: a discard).
    pub async fn fail_with(
        &self,
        job: &ClaimedJob,
        error: &str,
        outcome: FailOutcome,
    ) -> Result<()> {
        let now = self.now();
        self.backend
            .job_fail(JobFailParams {
                job: job.job_ref(),
                now,
                error: error.to_owned(),
                retry_at: match outcome {
                    FailOutcome::Retry { at } => Some(at),
                    FailOutcome::Dead | FailOutcome::Cancelled => None,
                },
                cancelled: outcome == FailOutcome::Cancelled,
            })
            .await?;
        self.record_failure(&job.queue, outcome);
        self.promote_after(std::slice::from_ref(job)).await;
        Ok(())
    }

    /// Counts a failed attempt (a cancel is not one).
    pub(crate) fn record_failure(&self, queue: &str, outcome: FailOutcome) {
        match outcome {
            FailOutcome::Retry { .. } => self.record(queue, self.now(), |c| c.failed += 1),
            FailOutcome::Dead => self.record(queue, self.now(), |c| {
                c.failed += 1;
                c.dead += 1;
            }),
            FailOutcome::Cancelled => {}
        }
    }

    /// Counts in this process's share of `backlog_stat` (flushed every few seconds).
    pub(crate) fn record(
        &self,
        queue: &str,
        now: i64,
        f: impl FnOnce(&mut backlog_core::StatCounts),
    ) {
        self.stats.record(queue, now, f);
        self.stats.start_flusher(&self.backend);
    }

    /// Counts claimed jobs as started, with each one's wait from due to start.
    fn record_started(&self, queue: &QueueName, claimed: &[ClaimedJob]) {
        self.record_starts(
            queue.as_str(),
            claimed.iter().map(|j| j.run_at.max(j.created_at)),
        );
    }

    /// Counts jobs of `queue` as started now, given when each was due.
    pub(crate) fn record_starts(&self, queue: &str, due: impl ExactSizeIterator<Item = i64>) {
        if due.len() == 0 {
            return;
        }
        let now = self.now();
        self.record(queue, now, |c| {
            c.started += due.len() as i64;
            for at in due {
                c.record_wait(now - at);
            }
        });
    }

    /// Adds this process's counts to `backlog_stat` now (a task also does every few seconds,
    /// and [`Client::close`] once more). Counts that could not be written are kept.
    pub async fn flush_stats(&self) -> Result<()> {
        crate::stats::flush(&self.stats, &*self.backend).await
    }

    /// Puts a running job back to available after `delay`, without consuming an attempt
    /// (reject / release). Fenced by the lease token.
    pub async fn release(&self, job: &ClaimedJob, delay: Duration) -> Result<()> {
        let now = self.now();
        self.backend
            .job_release(JobReleaseParams {
                job: job.job_ref(),
                now,
                run_at: now + delay.as_micros() as i64,
            })
            .await
    }

    /// Runs the job again after `delay` without counting this attempt (a handler's snooze).
    pub async fn snooze(&self, job: &ClaimedJob, delay: Duration) -> Result<()> {
        self.release(job, delay).await
    }

    /// Extends a lease to now + `lease`. `LeaseLost` if it is gone; the reply says whether
    /// cancellation of the job was requested.
    pub async fn heartbeat(&self, job: JobRef, lease: Duration) -> Result<Heartbeat> {
        let at = self.now() + lease.as_micros() as i64;
        let cancel_requested = self
            .backend
            .job_heartbeat(JobHeartbeatParams {
                job,
                lease_expires_at: at,
            })
            .await?;
        Ok(Heartbeat {
            lease_expires_at: at,
            cancel_requested,
        })
    }

    /// Stores progress (any JSON) on a running job, fenced by its lease.
    pub async fn progress<T: serde::Serialize + ?Sized>(
        &self,
        job: JobRef,
        progress: &T,
    ) -> Result<()> {
        let text = Payload::from_value(progress, self.payload_limit)?.into_string();
        self.backend
            .job_progress(JobProgressParams {
                job,
                progress: Some(text),
                result: None,
            })
            .await
    }

    /// Stores a result value (any JSON) on a running job, fenced by its lease. It stays with the
    /// job when the queue keeps or archives completed jobs.
    pub async fn set_result<T: serde::Serialize + ?Sized>(
        &self,
        job: JobRef,
        result: &T,
    ) -> Result<()> {
        let text = Payload::from_value(result, self.payload_limit)?.into_string();
        self.backend
            .job_progress(JobProgressParams {
                job,
                progress: None,
                result: Some(text),
            })
            .await
    }

    /// One job by id.
    pub async fn job(&self, id: i64) -> Result<Job> {
        self.backend
            .job_get(id)
            .await?
            .ok_or(Error::JobNotFound { job_id: id })
    }

    /// Jobs by queue and state, in id order after `after_id`.
    pub async fn jobs(
        &self,
        queue: Option<&QueueName>,
        state: Option<StateFilter>,
        after_id: i64,
        limit: u32,
    ) -> Result<Vec<Job>> {
        self.job_list(&JobListOpts {
            queue: queue.cloned(),
            state,
            kind: None,
            unique_key: None,
            after_id,
            limit,
        })
        .await
    }

    /// Jobs matching every filter that is set, in id order after `opts.after_id`: page by
    /// passing the last id seen (new jobs get higher ids, so paging is stable under inserts).
    pub async fn job_list(&self, opts: &JobListOpts) -> Result<Vec<Job>> {
        self.backend
            .job_list(JobListParams {
                queue: opts.queue.clone(),
                state: opts.state,
                kind: opts.kind.clone(),
                unique_key: opts.unique_key.as_ref().map(|k| k.as_str().to_owned()),
                after_id: opts.after_id,
                limit: opts.limit,
                now: self.now(),
            })
            .await
    }

    /// Cancels a job. One that is running is asked to stop: its worker sees the request at its
    /// next heartbeat, stops the handler and records the job as cancelled.
    pub async fn cancel(&self, id: i64) -> Result<Job> {
        match self
            .backend
            .job_admin(id, AdminAction::Cancel, self.now())
            .await
        {
            Err(Error::JobStateConflict {
                state: JobState::Running,
                ..
            }) => self.backend.job_cancel_request(id, self.now()).await,
            other => other,
        }
    }

    /// Holds an available job back (for example pending review).
    pub async fn hold(&self, id: i64) -> Result<Job> {
        self.backend
            .job_admin(id, AdminAction::Hold, self.now())
            .await
    }

    /// Releases a held job.
    pub async fn unhold(&self, id: i64) -> Result<Job> {
        self.backend
            .job_admin(id, AdminAction::Release, self.now())
            .await
    }

    /// Retries a dead, cancelled or completed job now, with its attempts reset.
    pub async fn retry(&self, id: i64) -> Result<Job> {
        self.backend
            .job_admin(id, AdminAction::Retry, self.now())
            .await
    }

    /// Makes a scheduled job, or one waiting to retry after a failure, due at once (its
    /// attempts are kept). `JobStateConflict` for a job in another state.
    pub async fn run_now(&self, id: i64) -> Result<Job> {
        self.backend
            .job_admin(id, AdminAction::RunNow, self.now())
            .await
    }

    /// Deletes a job that is not running, wherever it is kept (an archived one too), and
    /// returns it as it was. A running job is refused (`JobStateConflict`): cancel it first.
    pub async fn delete(&self, id: i64) -> Result<Job> {
        self.backend.job_delete(id, self.now()).await
    }

    /// Applies an operator's action to many jobs: those of `selection`, a page of
    /// [`BULK_PAGE`] at a time ([`BULK_IN_FLIGHT`] jobs at once), each job as its own action
    /// would change it (a running job asked to stop by `Cancel`, passed over by `Delete`). A
    /// job the action does not apply to (its state), or one gone
    /// meanwhile, is passed over and not counted as changed; any other error ends the action
    /// with it, the pages before it done. `progress` hears after each page how many jobs were
    /// seen and changed so far. Each job is its own short statement, so workers' claims never
    /// wait on a bulk action.
    pub async fn bulk(
        &self,
        action: impl Into<BulkAction>,
        selection: &JobSelection,
        mut progress: impl FnMut(BulkProgress),
    ) -> Result<BulkProgress> {
        let action = action.into();
        let mut done = BulkProgress::default();
        match selection {
            JobSelection::Ids(ids) => {
                if ids.is_empty() || ids.len() > BULK_MAX_IDS {
                    return Err(Error::ValueOutOfRange {
                        what: "the job ids of a bulk action",
                        value: ids.len() as i64,
                        min: 1,
                        max: BULK_MAX_IDS as i64,
                    });
                }
                for page in ids.chunks(BULK_PAGE as usize) {
                    done.seen += page.len() as u64;
                    done.changed += self.bulk_page(action, page).await?;
                    progress(done);
                }
            }
            JobSelection::Filter(f) => {
                let mut after_id = Some(0);
                while let Some(after) = after_id {
                    let (ids, next) = self.filter_page(f, after).await?;
                    done.seen += ids.len() as u64;
                    done.changed += self.bulk_page(action, &ids).await?;
                    progress(done);
                    after_id = next;
                }
            }
        }
        Ok(done)
    }

    /// How many jobs a filter matches now: what a bulk action would take (read a page of
    /// [`BULK_PAGE`] at a time, as the action reads them).
    pub async fn bulk_matching(&self, filter: &JobFilter) -> Result<u64> {
        let (mut n, mut after_id) = (0, Some(0));
        while let Some(after) = after_id {
            let (ids, next) = self.filter_page(filter, after).await?;
            n += ids.len() as u64;
            after_id = next;
        }
        Ok(n)
    }

    /// The ids of one page of the jobs `filter` matches past `after_id`, and the cursor of the
    /// next page (`None` at the end).
    async fn filter_page(
        &self,
        filter: &JobFilter,
        after_id: i64,
    ) -> Result<(Vec<i64>, Option<i64>)> {
        let page = self
            .job_list(&JobListOpts {
                queue: Some(filter.queue.clone()),
                state: filter.state,
                kind: filter.kind.clone(),
                unique_key: None,
                after_id,
                limit: BULK_PAGE,
            })
            .await?;
        let next = (page.len() == BULK_PAGE as usize)
            .then(|| page.last().map(|j| j.id))
            .flatten();
        let ids = page
            .iter()
            .filter(|j| filter.created_before.is_none_or(|t| j.created_at < t))
            .map(|j| j.id)
            .collect();
        Ok((ids, next))
    }

    /// One page of [`Client::bulk`], [`BULK_IN_FLIGHT`] jobs at a time: how many it changed.
    async fn bulk_page(&self, action: BulkAction, ids: &[i64]) -> Result<u64> {
        use futures::{StreamExt, TryStreamExt};
        futures::stream::iter(ids.to_vec())
            .map(|id| self.bulk_one(action, id))
            .buffer_unordered(BULK_IN_FLIGHT)
            .try_fold(0, |n, changed| async move { Ok(n + u64::from(changed)) })
            .await
    }

    /// One job of [`Client::bulk`]: whether the action changed it.
    async fn bulk_one(&self, action: BulkAction, id: i64) -> Result<bool> {
        let res = match action {
            BulkAction::Admin(AdminAction::Cancel) => self.cancel(id).await,
            BulkAction::Admin(action) => self.backend.job_admin(id, action, self.now()).await,
            BulkAction::Delete => self.delete(id).await,
        };
        match res {
            Ok(_) => Ok(true),
            Err(Error::JobStateConflict { .. } | Error::JobNotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Moves up to `limit` of a queue's dead jobs back to available.
    pub async fn redrive(&self, queue: &QueueName, limit: u32) -> Result<u64> {
        self.backend
            .queue_redrive(QueueRedriveParams {
                queue: queue.clone(),
                limit,
                now: self.now(),
            })
            .await
    }

    /// Jobs of these queues and kinds (empty: any kind) that are available, scheduled, waiting
    /// to retry or running.
    pub async fn pending(&self, queues: &[QueueName], kinds: &[Kind]) -> Result<i64> {
        self.backend
            .job_count_pending(&JobCountPendingParams {
                queues: queues.to_vec(),
                kinds: kinds.to_vec(),
                due_by: None,
            })
            .await
    }

    /// Jobs of these queues and kinds (empty: any kind) that are due now or running: what is
    /// left once jobs scheduled for later are set aside.
    pub async fn pending_due(&self, queues: &[QueueName], kinds: &[Kind]) -> Result<i64> {
        self.backend
            .job_count_pending(&JobCountPendingParams {
                queues: queues.to_vec(),
                kinds: kinds.to_vec(),
                due_by: Some(self.now()),
            })
            .await
    }

    /// Job counts per queue and state.
    pub async fn stats(&self, queue: Option<&QueueName>) -> Result<Vec<(String, QueueStats)>> {
        self.backend.queue_stats(queue, self.now()).await
    }

    /// Whether a queue exists: it has settings stored (every queue backlog enqueued to, or that
    /// was configured, has) or jobs (a plain-SQL producer's queue may have only those). An
    /// operator's action on a name that is neither (a typo) should change nothing.
    pub async fn queue_known(&self, queue: &QueueName) -> Result<bool> {
        if self.backend.queue_get(queue).await?.is_some() {
            return Ok(true);
        }
        let stats = self.stats(Some(queue)).await?;
        Ok(stats
            .iter()
            .any(|(name, s)| name == queue.as_str() && s.total() > 0))
    }

    /// The schema version of the database: the last migration applied (0 before `migrate`).
    pub async fn schema_version(&self) -> Result<i64> {
        self.backend.schema_version().await
    }

    /// Per queue, how long its oldest due available job has waited (queues with none due are
    /// left out): how far its workers are behind.
    pub async fn lag(&self) -> Result<Vec<(String, Duration)>> {
        let now = self.now();
        let oldest = self.backend.queue_oldest_due(now).await?;
        Ok(oldest
            .into_iter()
            .map(|(q, at)| (q, Duration::from_micros((now - at).max(0) as u64)))
            .collect())
    }

    /// What happened per minute over the last `minutes` minutes (this one included), of one
    /// queue or of all, oldest first; minutes nothing happened in have no row.
    pub async fn history(
        &self,
        queue: Option<&QueueName>,
        minutes: u32,
    ) -> Result<Vec<backlog_core::StatRow>> {
        let since = backlog_core::minute_of(self.now()) - (minutes.max(1) as i64 - 1) * 60_000_000;
        self.backend.stat_history(queue, since).await
    }

    /// Per queue, everything counted since the queue began (counters that only grow), summed
    /// over every process.
    pub async fn totals(&self) -> Result<Vec<backlog_core::StatRow>> {
        self.backend.stat_totals().await
    }

    /// Records an operator's action in the audit log (`backlog_audit`): who (`actor`), what
    /// (`action`, e.g. `job.retry`), on which queue or job, with details as JSON.
    pub async fn audit(
        &self,
        actor: &str,
        action: &str,
        queue: Option<&str>,
        job_id: Option<i64>,
        detail: serde_json::Value,
    ) -> Result<i64> {
        self.backend
            .audit_add(&backlog_core::AuditEntry {
                id: 0,
                at: self.now(),
                actor: actor.to_owned(),
                action: action.to_owned(),
                queue: queue.map(str::to_owned),
                job_id,
                detail: detail.to_string(),
            })
            .await
    }

    /// The audit log, newest first, filtered by queue, actor and action. An action that is not
    /// one of [`backlog_core::AUDIT_ACTIONS`], or an empty actor, is an error (`OptionInvalid`),
    /// not an empty page.
    pub async fn audit_log(
        &self,
        params: &backlog_core::AuditListParams,
    ) -> Result<Vec<backlog_core::AuditEntry>> {
        if let Some(action) = &params.action
            && !backlog_core::AUDIT_ACTIONS.contains(&action.as_str())
        {
            return Err(Error::OptionInvalid {
                what: "audit action",
                value: action.clone(),
                expected: backlog_core::AUDIT_ACTIONS_LIST,
            });
        }
        if params.actor.as_deref().is_some_and(|a| a.trim().is_empty()) {
            return Err(Error::OptionInvalid {
                what: "audit actor",
                value: String::new(),
                expected: "a token's name, local, or cli:USER",
            });
        }
        self.backend.audit_list(params).await
    }

    /// The periodic schedules (`backlog_cron`), by name: what each is, its jobs' queue and
    /// kind, the last tick fired and the next, as the leader declared them (every minute, and
    /// each one when it fired).
    pub async fn cron_schedules(&self) -> Result<Vec<backlog_core::CronSchedule>> {
        self.backend.cron_list().await
    }

    /// The workers registered in the database (`backlog_worker`), the longest running first:
    /// each run of a [`crate::Worker`] writes its row every 5 s and deletes it when it stops; a
    /// row past its `expires_at` is a worker that stopped without saying so (killed, cut off).
    pub async fn workers(&self) -> Result<Vec<backlog_core::WorkerRegistration>> {
        self.backend.worker_list().await
    }

    /// The oldest transaction another session holds open, where the database keeps row versions
    /// for it (PostgreSQL, MySQL): the usual reason dead rows pile up on disk.
    pub async fn oldest_transaction(&self) -> Result<Option<backlog_core::OldestTransaction>> {
        self.backend.db_oldest_transaction().await
    }

    /// Every known queue.
    pub async fn queues(&self) -> Result<Vec<QueueInfo>> {
        self.backend.queue_list().await
    }

    /// Pauses or resumes a queue.
    pub async fn queue_set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        self.settings.lock().expect("lock").remove(queue);
        self.backend
            .queue_set_paused(queue, paused, self.now())
            .await
    }

    /// A queue's stored settings, read now (not cached), or the defaults for a queue never
    /// configured: the base to change settings from.
    pub async fn queue_settings_stored(&self, queue: &QueueName) -> Result<QueueSettings> {
        Ok(self
            .backend
            .queue_get(queue)
            .await?
            .unwrap_or_else(|| QueueSettings::defaults(queue.clone())))
    }

    /// What flow control holds in a queue now: jobs running (against its global limit), jobs
    /// waiting for their ordered group's turn, and the groups a failed job holds.
    pub async fn queue_flow(&self, queue: &QueueName) -> Result<backlog_core::QueueFlow> {
        self.backend.queue_flow(queue, self.now()).await
    }

    /// Stores a queue's settings (the queue is created if new), and records what changed in the
    /// audit log (`queue.settings`) as done by this library, actor `library:HOST:PID`.
    pub async fn queue_configure(&self, settings: &QueueSettings) -> Result<()> {
        let actor = format!("library:{}", default_owner());
        self.queue_configure_by(settings, &actor).await
    }

    /// [`Client::queue_configure`] on behalf of `actor` (the CLI's `cli:USER`, the HTTP API's
    /// token name). The audit entry's detail is `{"changed": {SETTING: {"before": …, "after":
    /// …}}}` with each setting that differs from what was stored (a new queue's from the
    /// defaults); nothing is recorded when nothing changed. A failure to record is logged, not
    /// returned: the settings are stored by then.
    pub async fn queue_configure_by(&self, settings: &QueueSettings, actor: &str) -> Result<()> {
        check_settings(settings)?;
        let before = self.queue_settings_stored(&settings.name).await?;
        self.settings.lock().expect("lock").remove(&settings.name);
        self.backend.queue_upsert(settings, self.now()).await?;
        let changed = settings_changed(&before, settings);
        if !changed.is_empty() {
            let detail = serde_json::json!({ "changed": changed });
            let queue = Some(settings.name.as_str());
            if let Err(e) = self
                .audit(actor, "queue.settings", queue, None, detail)
                .await
            {
                tracing::warn!(error = %e, "the audit log could not record queue.settings");
            }
        }
        Ok(())
    }

    /// Closes the connections.
    pub async fn close(&self) {
        if let Err(e) = crate::stats::flush_last(&self.stats, &*self.backend).await {
            tracing::warn!(error = %e, "the last counts could not be written to backlog_stat; they are dropped");
        }
        self.backend.close().await;
    }
}

/// Each setting that differs between `before` and `after`, as `{"before": …, "after": …}`.
fn settings_changed(
    before: &QueueSettings,
    after: &QueueSettings,
) -> serde_json::Map<String, serde_json::Value> {
    let as_map = |s: &QueueSettings| match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (before, after) = (as_map(before), as_map(after));
    after
        .into_iter()
        .filter(|(k, v)| before.get(k) != Some(v))
        .map(|(k, v)| {
            let was = before.get(&k).cloned().unwrap_or(serde_json::Value::Null);
            (k, serde_json::json!({ "before": was, "after": v }))
        })
        .collect()
}

/// What a failed attempt of `job` at `now` leads to: a retry after the queue's backoff (with
/// jitter), or death once the job's attempts (its own limit, else the queue's) are used up.
fn fail_outcome(
    job: &ClaimedJob,
    settings: &QueueSettings,
    now: i64,
    after: Option<Duration>,
) -> FailOutcome {
    let max = job.max_attempts.unwrap_or(settings.max_attempts);
    if job.attempt >= max {
        return FailOutcome::Dead;
    }
    let delay = after.unwrap_or_else(|| {
        let attempt = job.attempt.max(1) as u32;
        backoff_delay(attempt, settings.backoff_base, settings.backoff_max)
    });
    FailOutcome::Retry {
        at: now + delay.as_micros() as i64,
    }
}

/// The runs of one queue in a batch and where each lies, without a String per job.
fn queue_runs(jobs: &[NewJob]) -> Vec<(QueueName, std::ops::Range<usize>)> {
    let mut runs: Vec<(QueueName, std::ops::Range<usize>)> = vec![];
    for (i, job) in jobs.iter().enumerate() {
        match runs.last_mut() {
            Some((q, r)) if *q == job.queue => r.end = i + 1,
            _ => runs.push((job.queue.clone(), i..i + 1)),
        }
    }
    runs
}

fn range(what: &'static str, value: i64, min: i64, max: i64) -> Result<()> {
    if value < min || value > max {
        return Err(Error::ValueOutOfRange {
            what,
            value,
            min,
            max,
        });
    }
    Ok(())
}

/// Checks what types cannot: ranges and limits.
fn check_new_job(job: &NewJob, payload_limit: usize) -> Result<()> {
    if job.payload.as_str().len() > payload_limit {
        return Err(Error::PayloadTooLarge {
            size: job.payload.as_str().len(),
            limit: payload_limit,
        });
    }
    if let Some(m) = job.max_attempts {
        range("max attempts", m as i64, 1, 10_000)?;
    }
    Ok(())
}

fn check_settings(s: &QueueSettings) -> Result<()> {
    range("max attempts", s.max_attempts as i64, 1, 10_000)?;
    range(
        "lease (ms)",
        s.lease.as_millis() as i64,
        1,
        7 * 24 * 3600 * 1000,
    )?;
    if let Some(c) = s.concurrency {
        range("concurrency", c as i64, 1, 10_000)?;
    }
    if let Some(c) = s.global_concurrency {
        range("global concurrency", c as i64, 1, 1_000_000)?;
    }
    range("group concurrency", s.group_concurrency as i64, 1, 10_000)?;
    range(
        "shards",
        i64::from(s.shards),
        1,
        i64::from(QueueSettings::MAX_SHARDS),
    )?;
    if let Some(r) = s.rate_limit {
        range("rate limit (starts)", r.starts as i64, 1, 1_000_000)?;
        range(
            "rate limit period (ms)",
            r.period.as_millis() as i64,
            1,
            7 * 24 * 3600 * 1000,
        )?;
    }
    if s.backoff_base > s.backoff_max {
        return Err(Error::OptionInvalid {
            what: "backoff",
            value: format!(
                "base {} > max {}",
                backlog_core::format_duration(s.backoff_base),
                backlog_core::format_duration(s.backoff_max)
            ),
            expected: "a base no larger than the max",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producers_leave_a_quarter_of_the_pool() {
        assert_eq!(producer_slots(1), None, "SQLite's one writer: no gate");
        assert_eq!(producer_slots(3), None);
        assert_eq!(producer_slots(4), Some(3));
        assert_eq!(producer_slots(10), Some(8));
        assert_eq!(producer_slots(16), Some(12));
        assert_eq!(producer_slots(100), Some(96), "at most 4 kept back");
    }

    fn job(attempt: i32, max_attempts: Option<i32>) -> ClaimedJob {
        ClaimedJob {
            attempt,
            max_attempts,
            ..crate::worker::fakes::job(1, 1)
        }
    }

    fn settings(max_attempts: i32) -> QueueSettings {
        QueueSettings {
            max_attempts,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            ..QueueSettings::defaults(QueueName::new("q").unwrap())
        }
    }

    /// The delay of a retry, in seconds.
    fn retry_in(outcome: FailOutcome) -> f64 {
        match outcome {
            FailOutcome::Retry { at } => (at - 1_000_000) as f64 / 1e6,
            other => panic!("a retry, not {other:?}"),
        }
    }

    #[test]
    fn a_failed_attempt_retries_after_a_growing_backoff() {
        for _ in 0..50 {
            let first = retry_in(fail_outcome(&job(1, None), &settings(5), 1_000_000, None));
            assert!((0.5..=1.0).contains(&first), "{first}");
            let third = retry_in(fail_outcome(&job(3, None), &settings(5), 1_000_000, None));
            assert!((2.0..=4.0).contains(&third), "{third}");
            let late = retry_in(fail_outcome(
                &job(20, Some(50)),
                &settings(5),
                1_000_000,
                None,
            ));
            assert!((30.0..=60.0).contains(&late), "capped: {late}");
        }
    }

    #[test]
    fn the_last_attempt_fails_for_good() {
        assert_eq!(
            fail_outcome(&job(5, None), &settings(5), 0, None),
            FailOutcome::Dead
        );
        assert_eq!(
            fail_outcome(&job(2, Some(2)), &settings(5), 0, None),
            FailOutcome::Dead
        );
        let own_limit = fail_outcome(&job(5, Some(6)), &settings(5), 0, None);
        assert!(
            matches!(own_limit, FailOutcome::Retry { .. }),
            "the job's own limit wins"
        );
    }

    #[test]
    fn a_retry_with_its_own_delay_still_ends_at_the_last_attempt() {
        let later = Some(Duration::from_secs(5));
        assert_eq!(
            fail_outcome(&job(2, None), &settings(3), 1_000_000, later),
            FailOutcome::Retry { at: 6_000_000 },
            "the handler's delay, counted from now"
        );
        assert_eq!(
            fail_outcome(&job(3, None), &settings(3), 0, later),
            FailOutcome::Dead,
            "the queue's limit, for a job without its own"
        );
        assert_eq!(
            fail_outcome(&job(3, Some(3)), &settings(9), 0, later),
            FailOutcome::Dead
        );
    }
}
