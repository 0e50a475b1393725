//! backlog: durable job and message queues in the SQL database you already run — SQLite
//! (embedded default), PostgreSQL, MySQL 8 / MariaDB.
//!
//! Map:
//! - [`Client`]: connect by URL, migrate, enqueue (one or many), claim, report outcomes
//!   (complete, fail, release, snooze, heartbeat — all fenced by the lease token), and administer
//!   jobs and queues.
//! - [`ClaimOpts`]: what a claim asks for.
//! - The core types re-exported from `backlog-core`: [`NewJob`], [`ClaimedJob`], [`Job`],
//!   [`JobState`], [`QueueSettings`], [`Error`] …
//!
//! # Example
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

mod client;
mod messaging;
pub mod testing;
mod typed;
mod worker;

pub use backlog_core::{
    AdminAction, Backend, Capabilities, ClaimStrategy, ClaimedJob, Clock, DEFAULT_PAYLOAD_LIMIT,
    EnqueueOutcome, Error, ErrorRecord, Job, JobRef, JobState, Kind, ManualClock, NewJob, Ordering,
    Payload, QueueInfo, QueueName, QueueSettings, QueueStats, Result, Retention, StateFilter,
    SystemClock, UniqueKey, format_duration, parse_duration,
};
pub use backlog_sql::{BackendConfig, SCHEMA_VERSION, redact_url};
pub use backlog_sql::{JobConnection, JobTx, MySqlBackend, PgBackend, SqlBackend, SqliteBackend};
pub use client::{ClaimOpts, Client, FailOutcome, Heartbeat};
/// The sqlx this crate is built with, for making pools and transactions of the same version.
pub use sqlx;
pub use tokio_util::sync::CancellationToken;
pub use typed::JobArgs;
pub use worker::{
    DrainMode, HandlerError, HandlerResult, JobContext, MaintenanceConfig, Outcome, PeriodicJob,
    RunReport, Schedule, Worker, WorkerBuilder, WorkerConfig,
};
