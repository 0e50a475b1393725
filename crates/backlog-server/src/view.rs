//! The JSON shapes the API answers with. A job is [`backlog::view::JobView`], the shape of
//! `backlog job show --json`: times come twice, in microseconds since the epoch and as RFC 3339
//! UTC (`…_rfc3339`), and stored JSON (payload, progress, result) is JSON, not a string holding
//! it. A claimed job's lease token travels as a string: it uses all 64 bits, more than a
//! JavaScript number holds exactly.

use backlog::view::{JobView, rfc3339};
use backlog::{ClaimedJob, EnqueueOutcome, QueueSettings, QueueStats};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// Stored JSON text as a JSON value (text that does not parse stays a string).
pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
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
    /// The payload, as stored.
    #[schema(value_type = serde_json::Value)]
    pub payload: Box<serde_json::value::RawValue>,
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
    /// When the lease runs out.
    pub lease_expires_at_rfc3339: String,
    /// When it was enqueued (µs).
    pub created_at: i64,
    /// The W3C `traceparent` of the span that enqueued it: make it the parent of the span that
    /// handles the job, and the trace goes on.
    pub traceparent: Option<String>,
    /// The W3C `tracestate` that came with it, if any.
    pub tracestate: Option<String>,
}

impl From<&ClaimedJob> for ClaimedView {
    fn from(c: &ClaimedJob) -> Self {
        ClaimedView {
            id: c.id,
            queue: c.queue.clone(),
            kind: c.kind.clone(),
            payload: backlog::view::raw_json(c.id, "payload", &c.payload).unwrap_or_else(|_| {
                serde_json::value::to_raw_value(&c.payload).expect("a string serializes")
            }),
            priority: c.priority,
            attempt: c.attempt,
            max_attempts: c.max_attempts,
            token: c.lease_token.to_string(),
            lease_expires_at: c.lease_expires_at,
            lease_expires_at_rfc3339: rfc3339(c.lease_expires_at),
            created_at: c.created_at,
            traceparent: c.trace_context.as_ref().map(|t| t.traceparent().to_owned()),
            tracestate: c
                .trace_context
                .as_ref()
                .and_then(|t| t.tracestate().map(str::to_owned)),
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
    /// Due later, never failed (delayed or scheduled).
    pub scheduled: i64,
    /// Due later after a failed attempt: waiting to retry.
    pub retrying: i64,
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
    /// Waiting for their ordered group's turn.
    pub waiting: i64,
    /// Moved to the archive table by retention `archive` (completed, dead or cancelled).
    pub archived: i64,
}

impl From<&QueueStats> for StatsView {
    fn from(s: &QueueStats) -> Self {
        StatsView {
            available: s.available,
            scheduled: s.scheduled,
            retrying: s.retrying,
            running: s.running,
            completed: s.completed,
            dead: s.dead,
            cancelled: s.cancelled,
            held: s.held,
            waiting: s.waiting,
            archived: s.archived,
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
    /// Most jobs running at once across every process (absent: no limit).
    pub global_concurrency: Option<u32>,
    /// Most jobs of one ordered group available or running at once.
    pub group_concurrency: u32,
    /// `block` or `next`: what a failing job of an ordered group does to its group.
    pub group_on_failure: String,
    /// At most this many job starts per period over every process, `N/PERIOD` (absent: none).
    pub rate_limit: Option<String>,
    /// At most this many job starts per period in each ordered group over every process,
    /// `N/PERIOD` (absent: none).
    pub group_rate_limit: Option<String>,
    /// Claim heads the queue's jobs are spread over (1: one strict order).
    pub shards: u16,
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
            global_concurrency: s.global_concurrency,
            group_concurrency: s.group_concurrency,
            group_on_failure: s.group_on_failure.as_str().to_owned(),
            rate_limit: s.rate_limit.map(|r| r.to_string()),
            group_rate_limit: s.group_rate_limit.map(|r| r.to_string()),
            shards: s.shards,
        }
    }
}

/// What flow control holds in a queue now.
#[derive(Debug, Serialize, ToSchema)]
pub struct FlowView {
    /// Jobs running in every process (what the global limit counts).
    pub running: i64,
    /// Jobs waiting for their ordered group's turn.
    pub waiting: i64,
    /// Groups with jobs waiting.
    pub waiting_groups: i64,
    /// Groups held up by their next job not being due (a failed job waiting to retry, or the
    /// group's rate limit), most jobs behind it first (at most 20).
    pub blocked: Vec<BlockedView>,
}

/// An ordered group held up by its next job not being due.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlockedView {
    /// The group key.
    pub group: String,
    /// The job holding it.
    pub job_id: i64,
    /// When that job runs: is retried, or its group's rate limit lets it start (RFC 3339).
    pub retry_at: String,
    /// `retry` (a failed job waits out its backoff) or `rate` (the group's rate limit).
    pub reason: String,
    /// Jobs of the group waiting behind it.
    pub waiting: i64,
}

impl From<&backlog::QueueFlow> for FlowView {
    fn from(f: &backlog::QueueFlow) -> Self {
        FlowView {
            running: f.running,
            waiting: f.waiting,
            waiting_groups: f.waiting_groups,
            blocked: (f.blocked.iter())
                .map(|b| BlockedView {
                    group: b.group.clone(),
                    job_id: b.job_id,
                    retry_at: rfc3339(b.retry_at),
                    reason: b.reason.as_str().to_owned(),
                    waiting: b.waiting,
                })
                .collect(),
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
    /// What flow control holds in it now (one queue's view; not in the list of queues).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowView>,
}
