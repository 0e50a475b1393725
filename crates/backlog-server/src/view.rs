//! The JSON shapes the API answers with. Times come twice: microseconds since the epoch (exact,
//! for programs) and RFC 3339 UTC (`…_time`, for people). JSON values (payload, progress, result)
//! are JSON, not strings holding JSON. Lease tokens travel as strings: they use all 64 bits,
//! more than a JavaScript number holds exactly.

use backlog::{ClaimedJob, EnqueueOutcome, Job, QueueSettings, QueueStats};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// Microseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn rfc3339(us: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(us.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// Stored JSON text as a JSON value (text that does not parse stays a string).
pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// One failed attempt.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorView {
    /// The attempt that failed.
    pub attempt: i32,
    /// When (µs).
    pub at: i64,
    /// When (RFC 3339).
    pub at_time: String,
    /// The error text.
    pub error: String,
}

/// A job.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: Option<String>,
    /// The stored state: available, running, completed, dead, cancelled or held.
    pub state: String,
    /// The state as people read it: `scheduled` or `retrying` for available jobs not yet due.
    pub reported_state: String,
    /// The payload.
    pub payload: Value,
    /// Lower runs first.
    pub priority: i16,
    /// Attempts made so far.
    pub attempt: i32,
    /// Its own max attempts (else the queue's).
    pub max_attempts: Option<i32>,
    /// When it may run next (µs).
    pub run_at: i64,
    /// When it may run next (RFC 3339).
    pub run_at_time: String,
    /// When it was enqueued (µs).
    pub created_at: i64,
    /// When it was enqueued (RFC 3339).
    pub created_at_time: String,
    /// When its last attempt started (µs).
    pub attempted_at: Option<i64>,
    /// When its last attempt started (RFC 3339).
    pub attempted_at_time: Option<String>,
    /// When it finished (µs).
    pub finished_at: Option<i64>,
    /// When it finished (RFC 3339).
    pub finished_at_time: Option<String>,
    /// The worker holding its lease.
    pub lease_owner: Option<String>,
    /// When the lease runs out (µs).
    pub lease_expires_at: Option<i64>,
    /// When the lease runs out (RFC 3339).
    pub lease_expires_at_time: Option<String>,
    /// Its unique key.
    pub unique_key: Option<String>,
    /// Failed attempts, oldest first.
    pub errors: Vec<ErrorView>,
    /// The handler's result.
    pub result: Option<Value>,
    /// The handler's progress.
    pub progress: Option<Value>,
    /// When cancellation of the running job was asked for (µs).
    pub cancel_requested_at: Option<i64>,
}

impl JobView {
    /// The view of a stored job, its reported state as of `now`.
    pub fn new(j: &Job, now: i64) -> Self {
        JobView {
            id: j.id,
            queue: j.queue.clone(),
            kind: j.kind.clone(),
            state: j.state.as_str().to_owned(),
            reported_state: j.reported_state(now).to_owned(),
            payload: json(&j.payload),
            priority: j.priority,
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            run_at: j.run_at,
            run_at_time: rfc3339(j.run_at),
            created_at: j.created_at,
            created_at_time: rfc3339(j.created_at),
            attempted_at: j.attempted_at,
            attempted_at_time: j.attempted_at.map(rfc3339),
            finished_at: j.finished_at,
            finished_at_time: j.finished_at.map(rfc3339),
            lease_owner: j.lease_owner.clone(),
            lease_expires_at: j.lease_expires_at,
            lease_expires_at_time: j.lease_expires_at.map(rfc3339),
            unique_key: j.unique_key.clone(),
            errors: j
                .errors
                .iter()
                .map(|e| ErrorView {
                    attempt: e.attempt,
                    at: e.at,
                    at_time: rfc3339(e.at),
                    error: e.error.clone(),
                })
                .collect(),
            result: j.result.as_deref().map(json),
            progress: j.progress.as_deref().map(json),
            cancel_requested_at: j.cancel_requested_at,
        }
    }
}

/// A page of jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobPage {
    /// The jobs, by id.
    pub jobs: Vec<JobView>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<i64>,
}

/// A job handed to a worker, with the lease that fences its outcome.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClaimedView {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: Option<String>,
    /// The payload.
    pub payload: Value,
    /// Its priority.
    pub priority: i16,
    /// This attempt's number (1 for the first).
    pub attempt: i32,
    /// Its own max attempts (else the queue's).
    pub max_attempts: Option<i32>,
    /// The lease token: send it with heartbeat, complete and fail.
    pub token: String,
    /// When the lease runs out unless extended (µs).
    pub lease_expires_at: i64,
    /// When the lease runs out (RFC 3339).
    pub lease_expires_at_time: String,
    /// When it was enqueued (µs).
    pub created_at: i64,
}

impl From<&ClaimedJob> for ClaimedView {
    fn from(c: &ClaimedJob) -> Self {
        ClaimedView {
            id: c.id,
            queue: c.queue.clone(),
            kind: c.kind.clone(),
            payload: json(&c.payload),
            priority: c.priority,
            attempt: c.attempt,
            max_attempts: c.max_attempts,
            token: c.lease_token.to_string(),
            lease_expires_at: c.lease_expires_at,
            lease_expires_at_time: rfc3339(c.lease_expires_at),
            created_at: c.created_at,
        }
    }
}

/// What an enqueue did.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnqueuedView {
    /// The job's id (the existing job's when its unique key was taken).
    pub id: i64,
    /// False when a job with the same unique key existed and nothing was created.
    pub created: bool,
}

impl From<EnqueueOutcome> for EnqueuedView {
    fn from(o: EnqueueOutcome) -> Self {
        EnqueuedView {
            id: o.id,
            created: o.created,
        }
    }
}

/// Job counts of one queue by reported state.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatsView {
    /// Available and due.
    pub available: i64,
    /// Due later (including those waiting to retry).
    pub scheduled: i64,
    /// Running.
    pub running: i64,
    /// Completed and kept.
    pub completed: i64,
    /// Dead.
    pub dead: i64,
    /// Cancelled.
    pub cancelled: i64,
    /// Held.
    pub held: i64,
}

impl From<&QueueStats> for StatsView {
    fn from(s: &QueueStats) -> Self {
        StatsView {
            available: s.available,
            scheduled: s.scheduled,
            running: s.running,
            completed: s.completed,
            dead: s.dead,
            cancelled: s.cancelled,
            held: s.held,
        }
    }
}

/// A queue's settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct SettingsView {
    /// The queue.
    pub name: String,
    /// Paused queues hand out no jobs.
    pub paused: bool,
    /// Attempts before a job is dead (unless the job sets its own).
    pub max_attempts: i32,
    /// First retry delay, e.g. `1s`.
    pub backoff_base: String,
    /// Longest retry delay, e.g. `1h`.
    pub backoff_max: String,
    /// Lease length a claim gives, e.g. `30s`.
    pub lease: String,
    /// `fifo` or `lifo` among equal priorities.
    pub order: String,
    /// `delete`, `keep` or `archive`: what completion does with the row.
    pub retention: String,
    /// Most jobs running at once per worker process (absent: the worker's own setting).
    pub concurrency: Option<u32>,
}

impl From<&QueueSettings> for SettingsView {
    fn from(s: &QueueSettings) -> Self {
        SettingsView {
            name: s.name.as_str().to_owned(),
            paused: s.paused,
            max_attempts: s.max_attempts,
            backoff_base: backlog::format_duration(s.backoff_base),
            backoff_max: backlog::format_duration(s.backoff_max),
            lease: backlog::format_duration(s.lease),
            order: s.order.as_str().to_owned(),
            retention: s.retention.as_str().to_owned(),
            concurrency: s.concurrency,
        }
    }
}

/// A queue: its settings and its job counts.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueView {
    /// Its settings.
    pub settings: SettingsView,
    /// Its job counts.
    pub stats: StatsView,
}
