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
    /// The jobs it waits for (its parents): it stays `waiting` until every one has ended, and
    /// is released, in the transaction that ends the last of them, as its queue's jobs are
    /// (see [`Dependency`]). At most [`MAX_PARENTS`]; each an existing job.
    pub depends_on: Vec<Dependency>,
}

/// Most parents one job may wait for.
pub const MAX_PARENTS: usize = 1000;

/// What a job does when one of its parents ends dead or cancelled instead of completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnParentFailure {
    /// It is cancelled at once, and so are the jobs waiting for it with this policy (the
    /// default).
    #[default]
    Cancel,
    /// It runs once every parent has ended, whatever their outcomes.
    Run,
    /// It runs once every parent has ended, as if this one had completed.
    Ignore,
}

impl OnParentFailure {
    /// Every policy's name, for messages.
    pub const NAMES: &'static str = "cancel, run, ignore";

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            OnParentFailure::Cancel => "cancel",
            OnParentFailure::Run => "run",
            OnParentFailure::Ignore => "ignore",
        }
    }

    /// The policy of a name.
    pub fn parse(s: &str) -> crate::Result<Self> {
        match s {
            "cancel" => Ok(OnParentFailure::Cancel),
            "run" => Ok(OnParentFailure::Run),
            "ignore" => Ok(OnParentFailure::Ignore),
            _ => Err(crate::Error::OptionInvalid {
                what: "parent failure policy",
                value: s.to_owned(),
                expected: Self::NAMES,
            }),
        }
    }
}

/// A job that another waits for, and what the waiting job does if it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dependency {
    /// The parent's id.
    pub parent: i64,
    /// What the child does if the parent ends dead or cancelled.
    pub on_failure: OnParentFailure,
}

/// Checks the dependencies of a batch before anything is written: at most [`MAX_PARENTS`] a
/// job, positive ids, no parent twice, and no job of an ordered group (not supported yet). Every
/// backend's insert calls it.
pub fn check_dependencies(jobs: &[NewJob]) -> crate::Result<()> {
    for job in jobs.iter().filter(|j| !j.depends_on.is_empty()) {
        let n = job.depends_on.len();
        if n > MAX_PARENTS {
            return Err(crate::Error::ValueOutOfRange {
                what: "parents of one job",
                value: n as i64,
                min: 0,
                max: MAX_PARENTS as i64,
            });
        }
        let mut seen = std::collections::HashSet::with_capacity(n);
        for d in &job.depends_on {
            if d.parent < 1 {
                return Err(crate::Error::DependencyInvalid {
                    reason: format!("parent id {} is not a job id", d.parent),
                });
            }
            if !seen.insert(d.parent) {
                return Err(crate::Error::DependencyInvalid {
                    reason: format!("job {} is named twice as a parent", d.parent),
                });
            }
        }
        if job.group.is_some() {
            return Err(crate::Error::DependencyInvalid {
                reason: "a job of an ordered group cannot wait for other jobs (not supported yet)"
                    .into(),
            });
        }
    }
    Ok(())
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
            depends_on: vec![],
        }
    }

    /// This job waits for job `parent` to end, and is cancelled if it ends dead or cancelled
    /// ([`OnParentFailure::Cancel`]).
    pub fn after(self, parent: i64) -> Self {
        self.after_with(parent, OnParentFailure::Cancel)
    }

    /// This job waits for job `parent` to end; `on_failure` says what it does if the parent ends
    /// dead or cancelled.
    pub fn after_with(mut self, parent: i64, on_failure: OnParentFailure) -> Self {
        self.depends_on.push(Dependency { parent, on_failure });
        self
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
    /// Its parents that have not ended yet: a `waiting` job with some waits for them, not for
    /// its group's turn (0 for a job that waits for none).
    pub deps_left: i32,
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
