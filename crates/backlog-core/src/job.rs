//! A job as enqueued, as claimed and as stored.

use serde::{Deserialize, Serialize};

use crate::{GroupKey, JobState, Kind, Payload, QueueName, TraceContext, UniqueKey};

/// A job to enqueue. Every field but `queue` and `payload` has a default.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The queue (created on first use).
    pub queue: QueueName,
    /// Optional kind, for typed handlers and filters.
    pub kind: Option<Kind>,
    /// The JSON payload.
    pub payload: Payload,
    /// Lower runs first; default 0.
    pub priority: i16,
    /// When the job may run, in microseconds since the epoch; `None` means now.
    pub run_at: Option<i64>,
    /// Attempts before the job is dead; `None` takes the queue's setting.
    pub max_attempts: Option<i32>,
    /// While a job with this key is not finished, enqueueing it again returns the existing id.
    pub unique_key: Option<UniqueKey>,
    /// The W3C trace context of the code that enqueued it, continued by the handler's span.
    /// `None` lets the client take the current span's (with the `opentelemetry` feature of
    /// the `backlog` crate), or leaves the job without one.
    pub trace_context: Option<TraceContext>,
    /// The ordered group it belongs to: jobs of a queue with one group key run in enqueue order,
    /// at most the queue's group concurrency of them at a time.
    pub group: Option<GroupKey>,
}

impl NewJob {
    /// A job with defaults for everything but queue and payload.
    pub fn new(queue: QueueName, payload: Payload) -> Self {
        NewJob {
            queue,
            kind: None,
            payload,
            priority: 0,
            run_at: None,
            max_attempts: None,
            unique_key: None,
            trace_context: None,
            group: None,
        }
    }

    /// This job in an ordered group: the jobs of its queue with the same group key run in
    /// enqueue order, at most the queue's group concurrency of them at a time.
    pub fn in_group(mut self, group: GroupKey) -> Self {
        self.group = Some(group);
        self
    }

    /// The distinct queues of a batch, sorted. A batch is mostly one queue in runs, so the
    /// common case compares each job's queue with the one before it and allocates nothing per
    /// job.
    pub fn queues_of(jobs: &[NewJob]) -> Vec<&QueueName> {
        let mut out: Vec<&QueueName> = Vec::new();
        for job in jobs {
            if out.last() != Some(&&job.queue) {
                out.push(&job.queue);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// What an enqueue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EnqueueOutcome {
    /// The job's id (the existing job's id when the unique key was taken).
    pub id: i64,
    /// False when a job with the same unique key already existed and nothing was created.
    pub created: bool,
}

/// A job and the lease that fences every outcome reported for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JobRef {
    /// The job.
    pub id: i64,
    /// The lease token issued by the claim.
    pub token: i64,
}

/// A job handed to a worker by a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimedJob {
    /// The job's id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind, if any.
    pub kind: Option<String>,
    /// The JSON payload.
    pub payload: String,
    /// Its priority.
    pub priority: i16,
    /// This attempt's number (1 for the first).
    pub attempt: i32,
    /// The job's own max attempts, if set (else the queue's applies).
    pub max_attempts: Option<i32>,
    /// The fencing token of this claim.
    pub lease_token: i64,
    /// When the lease runs out unless extended.
    pub lease_expires_at: i64,
    /// When the job was due.
    pub run_at: i64,
    /// When it was enqueued.
    pub created_at: i64,
    /// The trace context it was enqueued with, if any.
    pub trace_context: Option<TraceContext>,
    /// Its ordered group, if any: finishing it lets the group's next job run.
    pub group: Option<String>,
}

impl ClaimedJob {
    /// The (id, token) pair that fences this claim's outcome.
    pub fn job_ref(&self) -> JobRef {
        JobRef {
            id: self.id,
            token: self.lease_token,
        }
    }
}

/// One entry of a job's error history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// The attempt that failed.
    pub attempt: i32,
    /// When, in microseconds since the epoch.
    pub at: i64,
    /// The error text.
    pub error: String,
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind, if any.
    pub kind: Option<String>,
    /// The stored state.
    pub state: JobState,
    /// The JSON payload.
    pub payload: String,
    /// Lower runs first.
    pub priority: i16,
    /// When it may run next.
    pub run_at: i64,
    /// Attempts made so far.
    pub attempt: i32,
    /// Its own max attempts, if set.
    pub max_attempts: Option<i32>,
    /// Current lease token (running jobs).
    pub lease_token: Option<i64>,
    /// Who holds the lease.
    pub lease_owner: Option<String>,
    /// When the lease runs out.
    pub lease_expires_at: Option<i64>,
    /// The unique key, if any.
    pub unique_key: Option<String>,
    /// Every failed attempt, oldest first.
    pub errors: Vec<ErrorRecord>,
    /// Result value stored by the handler (JSON), if any.
    pub result: Option<String>,
    /// Progress reported by the handler (JSON), if any.
    pub progress: Option<String>,
    /// When it was enqueued.
    pub created_at: i64,
    /// When the last attempt started.
    pub attempted_at: Option<i64>,
    /// When it reached a finished state.
    pub finished_at: Option<i64>,
    /// When cancellation of the running job was requested, if it was.
    pub cancel_requested_at: Option<i64>,
    /// The trace context it was enqueued with, if any.
    pub trace_context: Option<TraceContext>,
    /// Its ordered group, if any.
    pub group: Option<String>,
    /// Read from the archive (`backlog_job_archive`, retention `archive`): finished for good,
    /// and no action changes it.
    pub archived: bool,
}

impl Job {
    /// The state as a user sees it: `scheduled` or `retrying` (an attempt counted, so one
    /// failed) for available jobs not yet due, as the counts and the state filters tell them.
    pub fn reported_state(&self, now: i64) -> &'static str {
        match (self.state, self.due(now)) {
            (JobState::Available, crate::Due::Retry) => "retrying",
            (JobState::Available, crate::Due::Later) => "scheduled",
            (s, _) => s.as_str(),
        }
    }

    /// The error for `action`, which this job's state does not allow.
    pub fn conflict(&self, action: &'static str) -> crate::Error {
        crate::Error::JobStateConflict {
            job_id: self.id,
            state: self.state,
            reported: self.reported_state(crate::now_micros()),
            action,
        }
    }

    /// When it runs, if it is available (the rule the counts and state filters share).
    pub fn due(&self, now: i64) -> crate::Due {
        crate::Due::of(self.run_at > now, self.attempt > 0)
    }
}
