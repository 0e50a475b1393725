//! The worker runtime, in parts with small interfaces that tests replace:
//! - `plan`: the claim planner, pure: claim sizes, waiting for a burst, poll backoff, drains.
//! - `fetch`: a claim loop per queue and loop slot ([`fetch::Fetcher`]), reaching the database
//!   through `Claimer` and starting jobs through `Dispatch`.
//! - `execute`: the run's `Dispatch` (`Executor`) and one job's handler (`Execution`: its first
//!   poll in the claim loop, then a task with its timeout, stop signal and panics caught).
//! - `outcome`: what a job's end does to its row (`verdict`, pure), recorded through `Reporter`.
//! - `completer`: finished jobs wait, with their slots, for their loop's next claim.
//! - `heartbeat`: renews the leases of long jobs and stops lost or cancelled ones.
//! - `maintenance`: what the elected leader runs, each task on its own cadence (rescue, prune,
//!   depth samples, vacuum, periodic jobs), through `MaintenanceOps`.
//! - `schedule`: when periodic jobs fire, and which ticks fired.
//! - `run`: a run wires the parts together and shuts down gracefully.

mod completer;
mod context;
mod execute;
#[cfg(test)]
pub(crate) mod fakes;
mod fetch;
mod heartbeat;
mod maintenance;
mod metrics;
mod outcome;
mod plan;
mod presence;
mod run;
mod schedule;
mod state;
mod throttle;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use context::{HandlerError, HandlerResult, JobContext, Outcome};
pub use maintenance::MaintenanceConfig;
pub use metrics::{CLAIM_BOUNDS_US, QueueLoad, WorkerMetrics};
pub use run::RunReport;
pub use schedule::{PeriodicJob, Schedule};

use crate::{Client, Error, JobArgs, Kind, QueueName, Result};

type BoxFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;
pub(crate) type ErasedHandler = Arc<dyn Fn(JobContext) -> BoxFuture + Send + Sync>;

/// The most jobs one claim takes on a backend with one writer (SQLite) unless
/// [`WorkerConfig::claim_batch`] says otherwise. A claimed job starts only when its claim's
/// statement returns, so a bigger claim holds its jobs back longer before they start (the S2
/// replay shows it); a smaller one costs throughput on a drain of very short jobs at high
/// concurrency. The figures are in docs/bench-journal/figures-behind-the-code.md.
pub const DEFAULT_CLAIM_MAX: usize = 100;

/// The most jobs one claim takes by default where claimers work side by side (PostgreSQL): a
/// queue gets one claim loop per this many slots. In transaction claim mode a claim's cost to
/// the worker is mostly per claim (its round trips, its commit): at concurrency 500, two loops
/// claiming 250 cost 3.5–4.2 µs of worker CPU a job against 4.9–6.0 for five loops of 100, and
/// drained at 93% of the best bare SQL against 73% (medians of six runs), with the S2 replay
/// unchanged (docs/bench-journal/2026-11-27-pg-fewer-larger-claims.md).
pub const MANY_CLAIMERS_CLAIM_MAX: usize = 250;

/// The most jobs one claim takes by default where claimers slow each other down (MySQL,
/// MariaDB; [`Capabilities::few_claimers`](backlog_core::Capabilities::few_claimers)): their
/// two loops each claim half the queue's slots, up to this. On MariaDB, two claims of 500 at
/// concurrency 1,000 drained 3× as fast as eight of 100
/// (docs/bench-journal/2026-11-26-mariadb-few-claimers.md).
pub const FEW_CLAIMERS_CLAIM_MAX: usize = 500;

/// Most claim loops a queue gets by default (`WorkerConfig::fetchers`): on a 2-core machine
/// sharing the database, 8 loops at concurrency 500 drained no faster than 4 or 5.
pub const MAX_AUTO_FETCHERS: usize = 8;

/// Long-lived worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Recorded as the lease owner of claimed jobs (default `host:pid`).
    pub owner: String,
    /// Lease length (default: each queue's setting). Heartbeats renew it every third of it.
    pub lease: Option<Duration>,
    /// A handler running longer is stopped and its job fails with a timeout.
    pub job_timeout: Option<Duration>,
    /// On shutdown, how long running jobs may finish before they are stopped and released.
    pub grace: Duration,
    /// Longest wait between polls of an empty queue (wake-ups end a wait early).
    pub poll_max: Duration,
    /// Most completions per statement.
    pub complete_batch: usize,
    /// Most jobs per claim (default: the claim loop's share of the queue's concurrency, half of
    /// it with two loops, so that one batch is being claimed while another finishes and the
    /// database sees two statements in flight, and at most [`MANY_CLAIMERS_CLAIM_MAX`]). A
    /// claimed job starts when its claim's statement returns, and a bigger claim takes longer:
    /// raise it for throughput of very short jobs at high concurrency, lower it for the
    /// quickest start. On SQLite (one writer: claims run one at
    /// a time and each costs a commit) the default is every free slot, up to
    /// [`DEFAULT_CLAIM_MAX`]; on MySQL and MariaDB (where claimers slow each other down), half
    /// the concurrency up to [`FEW_CLAIMERS_CLAIM_MAX`].
    ///
    /// A transaction claim (`claim_in_transaction`) whose loop's last claim saw every job end
    /// in its first poll goes ahead of its free slots: up to this setting when it is set, else
    /// up to [`MANY_CLAIMERS_CLAIM_MAX`] (PostgreSQL) or [`FEW_CLAIMERS_CLAIM_MAX`] (MySQL,
    /// MariaDB), whatever the concurrency. Such jobs hold a slot only while the loop polls them,
    /// so one slot serves job after job and the concurrency still bounds the jobs running at
    /// once; jobs a claim finds no free slot for are left alone at its commit, unwritten and
    /// free at once. At concurrency 100 on PostgreSQL this drained no-op jobs 2.5× as fast
    /// (docs/bench-journal/2026-11-28-claims-ahead-of-free-slots.md).
    pub claim_batch: Option<usize>,
    /// Claim loops per queue, sharing its concurrency: with two, one claim can be in flight while
    /// the other loop's jobs run and complete, as two hand-written loops would. `None` (the
    /// default): enough loops for their claims to fill the queue's concurrency, one per
    /// [`MANY_CLAIMERS_CLAIM_MAX`] slots, at least 2 and at most [`MAX_AUTO_FETCHERS`] (a queue
    /// of concurrency 500 gets 2, of 2,000 gets 8). Several loops claim side by side, which a
    /// queue with shards (`QueueSettings::shards`) lets the database do without them meeting at
    /// one head. On SQLite the default is 2 whatever the concurrency: more loops would only
    /// queue for its one writer. On MySQL and MariaDB it is 2 as well: each claim there scans
    /// past what the others' claims left at the head of the claim index, so more claimers drain
    /// slower.
    pub fetchers: Option<usize>,
    /// How long a claim loop may spend, per claim, polling its jobs' handlers once itself
    /// before it hands the rest to tasks of their own (default 1 ms). A handler that ends in its
    /// first poll (a quick job) then costs no task, no timer and no wake-up of another thread,
    /// and its completion goes with the loop's next claim; one that awaits anything is handed to
    /// a task at its first `await`. Set it to zero to give every job a task at once (for
    /// handlers that do long work without awaiting, which would hold up the next claim).
    pub inline_budget: Duration,
    /// Claim in transaction claim mode where the database has row locks (PostgreSQL, MySQL and
    /// MariaDB; default on): a claim locks its jobs and writes nothing to them, each handler is
    /// polled once, and one commit completes the jobs that ended there and leases the rest,
    /// which then run on as any claimed job. A job that ends in its first poll then costs its
    /// row one write (the completion) instead of two (the claim's lease, then the completion).
    /// A claim loop whose jobs mostly outlive their first poll claims under a lease at once for
    /// a while, and looks again later. What it gives up: if the process dies while its handlers
    /// take their first poll, those jobs are free again at once with no attempt counted, so a
    /// handler that kills the process in its first poll (not a panic: those are caught) is never
    /// counted towards its job's `max_attempts`. Queues with a global concurrency limit or a
    /// rate limit always claim under a lease.
    pub claim_in_transaction: bool,
    /// Stop once the queues are drained (see [`DrainMode`]); `None` runs until shut down.
    pub drain: Option<DrainMode>,
    /// Maintenance (leader election, rescue, pruning, periodic jobs); `None` to run none.
    pub maintenance: Option<MaintenanceConfig>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            owner: crate::client::default_owner(),
            lease: None,
            job_timeout: None,
            grace: Duration::from_secs(30),
            poll_max: Duration::from_secs(1),
            complete_batch: 500,
            claim_batch: None,
            fetchers: None,
            inline_budget: Duration::from_millis(1),
            claim_in_transaction: true,
            drain: None,
            maintenance: Some(MaintenanceConfig::default()),
        }
    }
}

/// When a draining worker stops. Either way only jobs the worker may take count: those of its
/// queues, and of its kinds when it claims only some.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainMode {
    /// Once no job of the queues is available, scheduled, running or waiting to retry
    /// (`backlog work --drain`).
    All,
    /// Once no job of the queues is due or running (jobs scheduled for later stay).
    Due,
}

/// Builds a [`Worker`].
///
/// # Example
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> backlog::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite://{}", dir.path().join("w.db").display());
/// use std::sync::Arc;
/// use backlog::{Client, JobArgs, JobContext, Outcome, Worker};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Greet { name: String }
/// impl JobArgs for Greet { const KIND: &'static str = "greet"; }
///
/// let client = Arc::new(Client::connect(&url).await?);
/// client.migrate().await?;
/// client.enqueue(client.job_for(&Greet { name: "Ada".into() })?).await?;
///
/// let worker = Worker::builder(client.clone())
///     .queue("default", 4)
///     .handler(|_ctx: JobContext, args: Greet| async move {
///         println!("hello, {}", args.name);
///         Ok(Outcome::Complete)
///     })
///     .build()?;
/// let report = worker.drain().await?;
/// assert_eq!(report.completed, 1);
/// # Ok(()) }
/// ```
pub struct WorkerBuilder {
    client: Arc<Client>,
    queues: Vec<(String, usize)>,
    handlers: HashMap<String, ErasedHandler>,
    fallback: Option<ErasedHandler>,
    kinds: Vec<String>,
    periodic: Vec<PeriodicJob>,
    config: WorkerConfig,
}

impl WorkerBuilder {
    /// Works `queue` with up to `concurrency` jobs at once.
    pub fn queue(mut self, queue: &str, concurrency: usize) -> Self {
        self.queues.push((queue.to_owned(), concurrency));
        self
    }

    /// Registers the handler of a typed job kind.
    pub fn handler<A, F, Fut>(mut self, f: F) -> Self
    where
        A: JobArgs,
        F: Fn(JobContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        let f = Arc::new(f);
        let erased: ErasedHandler = Arc::new(move |ctx: JobContext| {
            let f = f.clone();
            Box::pin(async move {
                let args: A = serde_json::from_str(&ctx.job().payload).map_err(|e| {
                    format!(
                        "payload does not decode as {}: {e}",
                        std::any::type_name::<A>()
                    )
                })?;
                f(ctx, args).await
            })
        });
        self.handlers.insert(A::KIND.to_owned(), erased);
        self
    }

    /// Registers a handler of a kind by name, receiving the raw payload (`ctx.job().payload`).
    pub fn raw_handler<F, Fut>(mut self, kind: &str, f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.handlers
            .insert(kind.to_owned(), Arc::new(move |ctx| Box::pin(f(ctx))));
        self
    }

    /// Runs jobs of every kind (and of none) that has no handler of its own.
    pub fn fallback_handler<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.fallback = Some(Arc::new(move |ctx| Box::pin(f(ctx))));
        self
    }

    /// Claims only jobs of these kinds (by default: the kinds with handlers, or any kind when a
    /// fallback handler is registered).
    pub fn kinds(mut self, kinds: &[&str]) -> Self {
        self.kinds = kinds.iter().map(|k| (*k).to_owned()).collect();
        self
    }

    /// A periodic job the elected leader enqueues once per tick.
    pub fn periodic(mut self, job: PeriodicJob) -> Self {
        self.periodic.push(job);
        self
    }

    /// Replaces the settings.
    pub fn config(mut self, config: WorkerConfig) -> Self {
        self.config = config;
        self
    }

    /// Changes the settings in place.
    pub fn configure(mut self, f: impl FnOnce(&mut WorkerConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// Checks everything and builds the worker.
    pub fn build(self) -> Result<Worker> {
        if self.queues.is_empty() {
            return Err(Error::OptionInvalid {
                what: "worker queues",
                value: "none".into(),
                expected: "at least one queue",
            });
        }
        let mut queues = vec![];
        for (name, concurrency) in &self.queues {
            if *concurrency == 0 || *concurrency > 10_000 {
                return Err(Error::ValueOutOfRange {
                    what: "concurrency",
                    value: *concurrency as i64,
                    min: 1,
                    max: 10_000,
                });
            }
            queues.push((QueueName::new(name.as_str())?, *concurrency));
        }
        if self.handlers.is_empty() && self.fallback.is_none() {
            return Err(Error::OptionInvalid {
                what: "worker handlers",
                value: "none".into(),
                expected: "at least one handler",
            });
        }
        let mut kinds: Vec<Kind> = if !self.kinds.is_empty() {
            self.kinds
                .iter()
                .map(|k| Kind::new(k.as_str()))
                .collect::<Result<_>>()?
        } else if self.fallback.is_some() {
            vec![]
        } else {
            self.handlers
                .keys()
                .map(|k| Kind::new(k.as_str()))
                .collect::<Result<_>>()?
        };
        kinds.sort();
        Ok(Worker {
            inner: Arc::new(state::Inner {
                client: self.client,
                queues,
                handlers: self.handlers,
                fallback: self.fallback,
                kinds,
                periodic: self.periodic,
                config: self.config,
                counters: Arc::default(),
                claim_times: Default::default(),
                loads: Default::default(),
            }),
        })
    }
}

/// Runs handlers for the jobs of its queues until shut down (or drained).
#[derive(Clone)]
pub struct Worker {
    pub(crate) inner: Arc<state::Inner>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("queues", &self.inner.queues)
            .field("kinds", &self.inner.kinds)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A builder for a worker using `client` (a [`Client`] or an `Arc<Client>`).
    pub fn builder(client: impl Into<Arc<Client>>) -> WorkerBuilder {
        WorkerBuilder {
            client: client.into(),
            queues: vec![],
            handlers: HashMap::new(),
            fallback: None,
            kinds: vec![],
            periodic: vec![],
            config: WorkerConfig::default(),
        }
    }

    /// The client.
    pub fn client(&self) -> &Arc<Client> {
        &self.inner.client
    }

    /// Runs until `shutdown` is cancelled (then stops claiming, lets running jobs finish within
    /// the grace period, and releases the rest), or until drained when `config.drain` is set.
    pub async fn run(&self, shutdown: tokio_util::sync::CancellationToken) -> Result<RunReport> {
        let abort = tokio_util::sync::CancellationToken::new();
        run::run(self.inner.clone(), shutdown, abort).await
    }

    /// Like [`Worker::run`]; cancelling `abort` after `shutdown` ends the grace period at once
    /// (running jobs are stopped and released).
    pub async fn run_until(
        &self,
        shutdown: tokio_util::sync::CancellationToken,
        abort: tokio_util::sync::CancellationToken,
    ) -> Result<RunReport> {
        run::run(self.inner.clone(), shutdown, abort).await
    }

    /// What this worker is doing now: each queue's running jobs against its concurrency, its
    /// claims and their durations, and the outcomes it recorded (see `backlog work --metrics`).
    pub fn metrics(&self) -> WorkerMetrics {
        let mut m = metrics::snapshot(
            &self.inner.loads,
            &self.inner.claim_times,
            &self.inner.counters,
        );
        let client = &self.inner.client;
        if client.time_source() == crate::TimeSource::Database {
            m.clock_offset_seconds = Some(client.clock_offset() as f64 / 1e6);
        }
        m
    }

    /// Works the queues until no job of them is due or running, then returns (for tests and
    /// batch scripts; jobs scheduled for later stay, and so do a paused queue's). Runs no
    /// maintenance.
    pub async fn drain(&self) -> Result<RunReport> {
        let mut inner = (*self.inner).clone();
        inner.config.drain = Some(DrainMode::Due);
        inner.config.maintenance = None;
        let token = tokio_util::sync::CancellationToken::new();
        run::run(Arc::new(inner), token.clone(), token).await
    }
}
