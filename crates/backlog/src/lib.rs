//! backlog: durable job and message queues in the SQL database you already run — SQLite
//! (embedded default), PostgreSQL, MySQL 8 / MariaDB.
//!
//! Map:
//! - [`Client`]: connect by URL or from your own sqlx pool ([`Client::from_sql`]), migrate,
//!   enqueue (one, many, or inside your own transaction with [`Client::enqueue_in`]), claim,
//!   report outcomes (complete, fail, release, snooze, heartbeat — all fenced by the lease token),
//!   and administer jobs and queues.
//! - [`JobArgs`]: a serde type that names its job kind; [`Client::job_for`] makes its jobs.
//! - [`Worker`]: the runtime — handlers by kind, concurrency per queue, batched completions,
//!   heartbeats, timeouts, cancel requests, graceful shutdown, transactional completion
//!   ([`Outcome::CompleteInTx`]), wake-ups, and leader-run maintenance with periodic jobs.
//! - Messaging: [`Client::subscribe`] / [`Client::publish`] (fan-out copies per subscribed queue)
//!   and [`Client::wait_for`] (a producer waiting for a job's outcome, across processes).
//! - [`view`]: the JSON shape of a job, shared by `--json` output and the HTTP API.
//! - [`testing`]: run a job inline, drain a queue, assert that a job was enqueued.
//! - The core types re-exported from `backlog-core`: [`NewJob`], [`ClaimedJob`], [`Job`],
//!   [`JobState`], [`QueueSettings`], [`Error`] …
//!
//! - Flow control over every process: a queue's [`QueueSettings::global_concurrency`] (at most
//!   N running at once), [`QueueSettings::rate_limit`] (at most N starts per period), and
//!   ordered groups ([`NewJob::in_group`]: a group's jobs run in enqueue order, at most
//!   [`QueueSettings::group_concurrency`] at a time, and at most
//!   [`QueueSettings::group_rate_limit`] starts per period in each group); see
//!   `docs/state-machine.md`.
//!
//! Programs in `examples/`: `typed_worker`, `transactions`, `cron_fanout_wait`, `flow_control`.
//!
//! # Enqueue, claim, complete by hand
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> backlog::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let url = format!("sqlite://{}", dir.path().join("doc.db").display());
//! use backlog::{ClaimOpts, Client};
//!
//! let client = Client::connect(&url).await?;
//! client.migrate().await?;
//! let job = client.new_job("emails", &serde_json::json!({"to": "a@example.com"}))?;
//! let id = client.enqueue(job).await?.id;
//!
//! let claimed = client.claim(&ClaimOpts::new("emails")?.limit(10)).await?;
//! assert_eq!(claimed[0].id, id);
//! client.complete(&claimed[0]).await?;
//! assert_eq!(client.job(id).await?.state, backlog::JobState::Completed);
//! # Ok(()) }
//! ```
//!
//! # A typed worker
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let url = format!("sqlite://{}", dir.path().join("doc.db").display());
//! use backlog::{CancellationToken, Client, JobArgs, JobContext, Outcome, Worker};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct SendEmail { to: String }
//! impl JobArgs for SendEmail {
//!     const KIND: &'static str = "send_email";
//!     const QUEUE: &'static str = "emails";
//! }
//!
//! let client = Client::connect(&url).await?;
//! client.migrate().await?;
//! client.enqueue(client.job_for(&SendEmail { to: "a@example.com".into() })?).await?;
//!
//! let worker = Worker::builder(client)
//!     .queue("emails", 10)
//!     .handler(|_ctx: JobContext, email: SendEmail| async move {
//!         if email.to.is_empty() {
//!             return Ok(Outcome::Discard("no address".into()));
//!         }
//!         Ok(Outcome::Complete) // an Err(...) retries with backoff
//!     })
//!     .build()?;
//! // In a service: worker.run(shutdown_token).await? until the token is cancelled.
//! let report = worker.drain().await?;
//! assert_eq!(report.completed, 1);
//! # let _ = CancellationToken::new();
//! # Ok(()) }
//! ```
//!
//! # Flow control
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> backlog::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let url = format!("sqlite://{}", dir.path().join("doc.db").display());
//! use backlog::{ClaimOpts, Client, GroupKey, QueueName, QueueSettings, RateLimit};
//! use std::time::Duration;
//!
//! let client = Client::connect(&url).await?;
//! client.migrate().await?;
//! // At most 5 ledger jobs running at once, and 100 started a minute, over every process.
//! client
//!     .queue_configure(&QueueSettings {
//!         global_concurrency: Some(5),
//!         rate_limit: Some(RateLimit { starts: 100, period: Duration::from_secs(60) }),
//!         ..QueueSettings::defaults(QueueName::new("ledger")?)
//!     })
//!     .await?;
//! // One account's entries run one at a time, in the order they were enqueued.
//! for n in 1..=3 {
//!     let entry = client.new_job("ledger", &serde_json::json!({ "n": n }))?;
//!     client.enqueue(entry.in_group(GroupKey::new("account-42")?)).await?;
//! }
//! let first = client.claim(&ClaimOpts::new("ledger")?.limit(10)).await?;
//! assert_eq!(first.len(), 1, "the group's next entry waits for this one");
//! client.complete(&first[0]).await?;
//! let second = client.claim(&ClaimOpts::new("ledger")?.limit(10)).await?;
//! assert_eq!(second.len(), 1);
//! # Ok(()) }
//! ```

mod client;
mod coalesce;
mod messaging;
mod stats;
pub mod testing;
mod time;
pub mod trace;
mod typed;
pub mod view;
mod worker;

pub use backlog_core::{
    AUDIT_ACTIONS, AdminAction, AuditEntry, AuditListParams, Backend, BlockReason, BlockedGroup,
    Capabilities, ClaimStrategy, ClaimedJob, Clock, CompleteClaimed, CronSchedule,
    DEFAULT_PAYLOAD_LIMIT, DbErrorKind, Dependency, EnqueueOutcome, Error, ErrorRecord,
    GroupFailure, GroupKey, Job, JobRef, JobState, Kind, MAX_PARENTS, ManualClock, NewJob,
    OnParentFailure, Ordering, Payload, QueueFlow, QueueInfo, QueueName, QueueSettings, QueueStats,
    RateLimit, Result, Retention, StatCounts, StatDepth, StatRow, StateFilter, SystemClock,
    TraceContext, TxClaim, TxFailure, TxFinish, UniqueKey, WAIT_BOUNDS_US, WorkerRegistration,
    check_dependencies, format_duration, minute_of, parse_duration,
};
/// For tests that need no database: `Client::from_backend(Arc::new(MemoryBackend::new()))`.
///
/// # Example
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
///
/// use backlog::{Client, JobState, MemoryBackend, Outcome, Worker};
///
/// let client = Arc::new(Client::from_backend(Arc::new(MemoryBackend::new())));
/// let job = client.new_job("emails", &serde_json::json!({"to": "a@example.com"}))?;
/// let id = client.enqueue(job).await?.id;
/// let worker = Worker::builder(client.clone())
///     .queue("emails", 4)
///     .fallback_handler(|_ctx| async { Ok(Outcome::Complete) })
///     .build()?;
/// assert_eq!(worker.drain().await?.completed, 1);
/// assert_eq!(client.job(id).await?.state, JobState::Completed);
/// # Ok(()) }
/// ```
pub use backlog_memory::MemoryBackend;
pub use backlog_sql::{BackendConfig, SCHEMA_VERSION, redact_url, rotate_hosts};
pub use backlog_sql::{JobConnection, JobTx, MySqlBackend, PgBackend, SqlBackend, SqliteBackend};
pub use client::{
    BULK_IN_FLIGHT, BULK_MAX_IDS, BULK_PAGE, BulkAction, BulkProgress, ClaimOpts, Client,
    FailOutcome, Heartbeat, JobFilter, JobListOpts, JobSelection,
};
/// The sqlx this crate is built with, for making pools and transactions of the same version.
pub use sqlx;
pub use time::{ClockSync, TimeSource};
pub use tokio_util::sync::CancellationToken;
pub use typed::JobArgs;
pub use worker::{
    CLAIM_BOUNDS_US, DEFAULT_CLAIM_MAX, DrainMode, FEW_CLAIMERS_CLAIM_MAX, HandlerError,
    HandlerResult, JobContext, MANY_CLAIMERS_CLAIM_MAX, MAX_AUTO_FETCHERS, MaintenanceConfig,
    Outcome, PeriodicJob, QueueLoad, RunReport, Schedule, Worker, WorkerBuilder, WorkerConfig,
    WorkerMetrics,
};
