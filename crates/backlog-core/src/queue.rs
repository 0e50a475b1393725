//! Queue settings and statistics.

use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, JobState, QueueName};

/// Order of jobs of equal priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ordering {
    /// Oldest first (by `run_at`, then id).
    #[default]
    Fifo,
    /// Newest first.
    Lifo,
}

impl Ordering {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Ordering::Fifo => "fifo",
            Ordering::Lifo => "lifo",
        }
    }
}

impl FromStr for Ordering {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "fifo" => Ok(Ordering::Fifo),
            "lifo" => Ok(Ordering::Lifo),
            _ => Err(Error::OptionInvalid {
                what: "order",
                value: s.into(),
                expected: "fifo, lifo",
            }),
        }
    }
}

/// What happens to a job when it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Retention {
    /// The row is deleted at once.
    Delete,
    /// The row stays, in state `completed` (pruned later by maintenance).
    #[default]
    Keep,
    /// The row moves to `backlog_job_archive`.
    Archive,
}

impl Retention {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Retention::Delete => "delete",
            Retention::Keep => "keep",
            Retention::Archive => "archive",
        }
    }
}

impl FromStr for Retention {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "delete" => Ok(Retention::Delete),
            "keep" => Ok(Retention::Keep),
            "archive" => Ok(Retention::Archive),
            _ => Err(Error::OptionInvalid {
                what: "retention",
                value: s.into(),
                expected: "delete, keep, archive",
            }),
        }
    }
}

/// A queue's settings. A queue without a row in `backlog_queue` has the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueSettings {
    /// The queue.
    #[serde(serialize_with = "ser_display")]
    pub name: QueueName,
    /// Paused queues hand out no jobs.
    pub paused: bool,
    /// Attempts before a job is dead (unless the job sets its own).
    pub max_attempts: i32,
    /// First retry delay.
    #[serde(serialize_with = "ser_duration")]
    pub backoff_base: Duration,
    /// Longest retry delay.
    #[serde(serialize_with = "ser_duration")]
    pub backoff_max: Duration,
    /// Lease length given by a claim.
    #[serde(serialize_with = "ser_duration")]
    pub lease: Duration,
    /// FIFO or LIFO among equal priorities.
    pub order: Ordering,
    /// What completion does with the row.
    pub retention: Retention,
    /// Most jobs of this queue running at once per worker process (`None`: the worker's own setting).
    pub concurrency: Option<u32>,
    /// Most jobs of this queue running at once across every process and machine (`None`: no
    /// limit). Enforced where jobs are claimed.
    pub global_concurrency: Option<u32>,
    /// Most jobs of one ordered group available or running at once (1: one at a time).
    pub group_concurrency: u32,
    /// What a failing job of an ordered group does to its group while it waits to retry.
    pub group_on_failure: GroupFailure,
    /// At most this many job starts per period in the queue, over every process (`None`: no
    /// limit).
    pub rate_limit: Option<RateLimit>,
}

/// A rate limit: at most `starts` job starts per `period` (a token bucket of `starts` tokens
/// that refills at `starts` per `period`, kept in the database).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RateLimit {
    /// Starts per period.
    pub starts: u32,
    /// The period.
    #[serde(serialize_with = "ser_duration")]
    pub period: Duration,
}

impl RateLimit {
    /// Parses `N/PERIOD`, e.g. `100/1m`, `5/1s` (a bare `N` is per second).
    pub fn parse(s: &str) -> Result<Self, Error> {
        let bad = || Error::OptionInvalid {
            what: "rate limit",
            value: s.into(),
            expected: "N/PERIOD such as 100/1m or 5/1s, N from 1 to 1000000",
        };
        let (n, period) = s.split_once('/').unwrap_or((s, "1s"));
        let starts: u32 = n.trim().parse().map_err(|_| bad())?;
        let period = crate::parse_duration(period.trim()).map_err(|_| bad())?;
        if !(1..=1_000_000).contains(&starts) || period.is_zero() {
            return Err(bad());
        }
        Ok(RateLimit { starts, period })
    }
}

impl std::fmt::Display for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.starts, crate::format_duration(self.period))
    }
}

/// What a failing job of an ordered group does to its group while it waits for its retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupFailure {
    /// The group waits until the job succeeds, or is dead or cancelled (SQS FIFO's rule): its
    /// order is never broken.
    Block,
    /// The group's next job runs; the failed one waits for its turn again when its retry is due.
    Next,
}

impl GroupFailure {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupFailure::Block => "block",
            GroupFailure::Next => "next",
        }
    }
}

impl FromStr for GroupFailure {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "block" => Ok(GroupFailure::Block),
            "next" => Ok(GroupFailure::Next),
            _ => Err(Error::OptionInvalid {
                what: "group failure rule",
                value: s.into(),
                expected: "block, next",
            }),
        }
    }
}

fn ser_display<S: serde::Serializer>(v: &QueueName, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_str())
}

fn ser_duration<S: serde::Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::format_duration(*v))
}

impl QueueSettings {
    /// Default attempts.
    pub const DEFAULT_MAX_ATTEMPTS: i32 = 25;

    /// The defaults for a queue.
    pub fn defaults(name: QueueName) -> Self {
        QueueSettings {
            name,
            paused: false,
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(3600),
            lease: Duration::from_secs(30),
            order: Ordering::Fifo,
            retention: Retention::Keep,
            concurrency: None,
            global_concurrency: None,
            group_concurrency: 1,
            group_on_failure: GroupFailure::Block,
            rate_limit: None,
        }
    }
}

/// What flow control holds in a queue now (`backlog queue show`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueFlow {
    /// Jobs running, in every process (what the global limit counts).
    pub running: i64,
    /// Jobs waiting for their ordered group's turn.
    pub waiting: i64,
    /// Groups that have jobs waiting.
    pub waiting_groups: i64,
    /// Groups held up by a failed job waiting to retry (`group_on_failure = block`), those
    /// with the most jobs behind them first (at most 20).
    pub blocked: Vec<BlockedGroup>,
}

/// An ordered group held up by a failed job that waits to retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedGroup {
    /// The group key.
    pub group: String,
    /// The failed job that holds the group.
    pub job_id: i64,
    /// When it is retried.
    pub retry_at: i64,
    /// Jobs of the group waiting behind it.
    pub waiting: i64,
}

/// A queue in the queue list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueInfo {
    /// Its settings.
    #[serde(flatten)]
    pub settings: QueueSettings,
    /// Jobs not finished (available, running, held).
    pub pending: i64,
}

/// Job counts of one queue by reported state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    /// Available and due.
    pub available: i64,
    /// Available, due later (including those waiting to retry).
    pub scheduled: i64,
    /// Running.
    pub running: i64,
    /// Completed (kept).
    pub completed: i64,
    /// Dead.
    pub dead: i64,
    /// Cancelled.
    pub cancelled: i64,
    /// Held.
    pub held: i64,
    /// Waiting for their ordered group's turn.
    pub waiting: i64,
    /// Moved to `backlog_job_archive` (the queue's `archive` retention, or an archiving prune),
    /// whatever state they finished in; these are no longer counted under their state.
    pub archived: i64,
}

impl QueueStats {
    /// Counts `n` jobs stored in `state` under their reported state: available ones whose
    /// `run_at` is still to come (`not_due`) are scheduled.
    pub fn add(&mut self, state: JobState, not_due: bool, n: i64) {
        let slot = match state {
            JobState::Available if not_due => &mut self.scheduled,
            JobState::Available => &mut self.available,
            JobState::Running => &mut self.running,
            JobState::Completed => &mut self.completed,
            JobState::Dead => &mut self.dead,
            JobState::Cancelled => &mut self.cancelled,
            JobState::Held => &mut self.held,
            JobState::Waiting => &mut self.waiting,
        };
        *slot += n;
    }
}
