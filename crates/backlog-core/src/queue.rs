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
    /// At most this many job starts per period in each ordered group of the queue, over every
    /// process (`None`: no limit). Counted as a group's jobs take their turns: a job made ready
    /// beyond its group's limit waits, available and not due, until the limit lets it start.
    pub group_rate_limit: Option<RateLimit>,
    /// The claim heads the queue's jobs are spread over, 1 to [`QueueSettings::MAX_SHARDS`].
    /// With 1 (the default) the queue has one head and claims keep its order exactly: priority,
    /// then due time, then enqueue order (or newest first under LIFO). With more, each job goes to
    /// a shard at random and a claim starts at a random shard: concurrent claimers meet at
    /// different heads, which lets PostgreSQL claim several times faster, and the order holds
    /// within each shard only (priority first, then roughly FIFO across the queue). Backends
    /// whose claims never run side by side (SQLite, the memory backend) keep one head whatever
    /// the setting.
    pub shards: u16,
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

impl RateLimit {
    /// The time one start takes from the bucket, in microseconds: `period / starts`, rounded up
    /// (so that a period never holds one start more than the limit).
    pub fn step(&self) -> i64 {
        let period = self.period.as_micros().min(i64::MAX as u128) as u64;
        period.div_ceil(u64::from(self.starts.max(1))).max(1) as i64
    }

    /// Paces one start under this limit by the generic cell rate algorithm (a token bucket
    /// told as one time): `at` is the limit's theoretical arrival time as stored (`None` at
    /// first), `now` the time of the start. Returns when the start may happen (`now`, or later
    /// when the bucket is empty) and the arrival time to store. Starts spread evenly at
    /// `period / starts` apart once a burst of `starts` is spent; times in microseconds. A
    /// stored time ahead of `now` by more than the limit allows (another process's clock) is
    /// trusted: the start waits rather than the limit break.
    pub fn pace(&self, at: Option<i64>, now: i64) -> (i64, i64) {
        let step = self.step();
        let tolerance = step * (i64::from(self.starts.max(1)) - 1);
        // A bucket of `starts` tokens: a start may come `tolerance` before its arrival time.
        let tat = at.map_or(now, |at| at.max(now));
        ((tat - tolerance).max(now), tat + step)
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

    /// Most shards a queue may have.
    pub const MAX_SHARDS: u16 = 256;

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
            group_rate_limit: None,
            shards: 1,
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

/// An ordered group held up by its next job not being due: a failed job waiting to retry, or a
/// job its group's rate limit holds back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedGroup {
    /// The group key.
    pub group: String,
    /// The job that holds the group.
    pub job_id: i64,
    /// When it runs (is retried, or its group's rate limit lets it start).
    pub retry_at: i64,
    /// Why: `retry` (it failed and waits out its backoff) or `rate` (it has not run yet, and
    /// its group's rate limit holds it back).
    pub reason: BlockReason,
    /// Jobs of the group waiting behind it.
    pub waiting: i64,
}

/// Why an ordered group is held up ([`BlockedGroup`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockReason {
    /// A failed job waits out its backoff before its retry (`group_on_failure = block`).
    Retry,
    /// A job not run yet waits for its group's rate limit.
    Rate,
}

impl BlockReason {
    /// The reason for a held job that has made `attempts` attempts so far.
    pub fn of_attempts(attempts: i32) -> Self {
        if attempts > 0 {
            BlockReason::Retry
        } else {
            BlockReason::Rate
        }
    }

    /// The name shown.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockReason::Retry => "retry",
            BlockReason::Rate => "rate",
        }
    }
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
    /// Available, due later (delayed or scheduled), never failed.
    pub scheduled: i64,
    /// Available, due later after a failed attempt: waiting to retry.
    pub retrying: i64,
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
    /// Every job counted, in any state or archived.
    pub fn total(&self) -> i64 {
        self.available
            + self.scheduled
            + self.retrying
            + self.running
            + self.completed
            + self.dead
            + self.cancelled
            + self.held
            + self.waiting
            + self.archived
    }

    /// Counts `n` jobs stored in `state` under their reported state: available ones are
    /// available, scheduled or retrying as `due` says.
    pub fn add(&mut self, state: JobState, due: Due, n: i64) {
        let slot = match (state, due) {
            (JobState::Available, Due::Later) => &mut self.scheduled,
            (JobState::Available, Due::Retry) => &mut self.retrying,
            (state, _) => self.slot(state),
        };
        *slot += n;
    }

    fn slot(&mut self, state: JobState) -> &mut i64 {
        match state {
            JobState::Available => &mut self.available,
            JobState::Running => &mut self.running,
            JobState::Completed => &mut self.completed,
            JobState::Dead => &mut self.dead,
            JobState::Cancelled => &mut self.cancelled,
            JobState::Held => &mut self.held,
            JobState::Waiting => &mut self.waiting,
        }
    }
}

/// When an available job runs, as the counts tell it apart (the other states ignore it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Due now: available.
    Now,
    /// Due later, never failed: scheduled.
    Later,
    /// Due later after a failed attempt: retrying.
    Retry,
}

impl Due {
    /// From whether the job's `run_at` is still to come and whether it failed before (an
    /// attempt counted), as [`crate::Job::reported_state`] tells them apart.
    pub fn of(not_due: bool, failed_before: bool) -> Self {
        match (not_due, failed_before) {
            (false, _) => Due::Now,
            (true, false) => Due::Later,
            (true, true) => Due::Retry,
        }
    }

    /// From the flag the `queue_stats` statements return: 0 due, 1 later, 2 retrying.
    pub fn from_flag(flag: i64) -> Option<Self> {
        match flag {
            0 => Some(Due::Now),
            1 => Some(Due::Later),
            2 => Some(Due::Retry),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: i64 = 1_000_000;

    #[test]
    fn pace_lets_a_burst_through_then_spaces_starts_evenly() {
        let limit = RateLimit::parse("3/1s").unwrap();
        let now = 100 * SEC;
        let mut at = None;
        let mut starts = vec![];
        for _ in 0..6 {
            let (start, next) = limit.pace(at, now);
            starts.push(start - now);
            at = Some(next);
        }
        // Three at once (a full bucket), then one every third of a second as it refills: the
        // queue-wide limit's token bucket, told as one time.
        assert_eq!(starts, [0, 0, 0, 333_334, 666_668, 1_000_002]);
    }

    #[test]
    fn pace_refills_with_time_and_never_beyond_the_burst() {
        let limit = RateLimit::parse("2/1s").unwrap();
        let now = 100 * SEC;
        let (_, at) = limit.pace(None, now);
        let (_, at) = limit.pace(Some(at), now);
        // Empty: the next start waits half a second.
        assert_eq!(limit.pace(Some(at), now).0, now + SEC / 2);
        // An hour later the bucket is full again, and holds two, not thousands.
        let later = now + 3600 * SEC;
        let (s1, at) = limit.pace(Some(at), later);
        let (s2, at) = limit.pace(Some(at), later);
        let (s3, _) = limit.pace(Some(at), later);
        assert_eq!((s1, s2, s3), (later, later, later + SEC / 2));
    }

    #[test]
    fn pace_with_one_start_per_period_spaces_every_start() {
        let limit = RateLimit::parse("1/1m").unwrap();
        let (s1, at) = limit.pace(None, 0);
        let (s2, at) = limit.pace(Some(at), 0);
        let (s3, _) = limit.pace(Some(at), 10 * SEC);
        assert_eq!((s1, s2, s3), (0, 60 * SEC, 120 * SEC));
    }
}
