//! What happened per queue and minute (`backlog_stat`), and the operators' actions
//! (`backlog_audit`).

/// Upper bounds of the enqueue-to-start wait histogram, in microseconds: 1 ms, 10 ms, 100 ms,
/// 1 s, 10 s, 60 s; a seventh bucket takes longer waits.
pub const WAIT_BOUNDS_US: [i64; 6] = [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 60_000_000];

/// Counts of one queue over some span (a minute, or all time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatCounts {
    /// Jobs created.
    pub enqueued: i64,
    /// Jobs claimed (each attempt).
    pub started: i64,
    /// Jobs completed.
    pub completed: i64,
    /// Failed attempts (those retried and those that ended dead).
    pub failed: i64,
    /// Jobs that ended dead (attempts exhausted, discarded, or a last lease lost).
    pub dead: i64,
    /// Expired leases rescued.
    pub rescued: i64,
    /// Sum of the enqueue-to-start waits, in microseconds.
    pub wait_sum_us: i64,
    /// Waits per bucket of [`WAIT_BOUNDS_US`] (not cumulative); the last is longer than 60 s.
    pub wait: [i64; 7],
}

impl StatCounts {
    /// Records one job's wait from due to start.
    pub fn record_wait(&mut self, us: i64) {
        let us = us.max(0);
        self.wait_sum_us += us;
        let i = WAIT_BOUNDS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(WAIT_BOUNDS_US.len());
        self.wait[i] += 1;
    }

    /// Adds another span's counts.
    pub fn add(&mut self, o: &StatCounts) {
        self.enqueued += o.enqueued;
        self.started += o.started;
        self.completed += o.completed;
        self.failed += o.failed;
        self.dead += o.dead;
        self.rescued += o.rescued;
        self.wait_sum_us += o.wait_sum_us;
        for (a, b) in self.wait.iter_mut().zip(o.wait) {
            *a += b;
        }
    }

    /// Nothing counted.
    pub fn is_empty(&self) -> bool {
        *self == StatCounts::default()
    }
}

/// A queue's depth at one moment, as the leader samples it once a minute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatDepth {
    /// Available and due.
    pub available: i64,
    /// Available, due later.
    pub scheduled: i64,
    /// Running.
    pub running: i64,
    /// Dead (in the job table).
    pub dead: i64,
}

/// One row of `backlog_stat`: a queue's counts in one minute, and its depth if sampled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatRow {
    /// The queue.
    pub queue: String,
    /// The minute's start, in microseconds since the epoch (0: the sums of pruned minutes, or
    /// all time in a total).
    pub minute: i64,
    /// What happened.
    pub counts: StatCounts,
    /// The depth sampled in that minute.
    pub depth: Option<StatDepth>,
}

/// The start of the minute holding `us`.
pub fn minute_of(us: i64) -> i64 {
    us - us.rem_euclid(60_000_000)
}

/// An operator's action, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Its id (0 before it is recorded).
    pub id: i64,
    /// When, in microseconds since the epoch.
    pub at: i64,
    /// Who: a token's name, `local` for the open loopback server, `cli:USER` for the command.
    pub actor: String,
    /// What: one of [`AUDIT_ACTIONS`].
    pub action: String,
    /// The queue concerned, if any.
    pub queue: Option<String>,
    /// The job concerned, if any.
    pub job_id: Option<i64>,
    /// Details (JSON): the new settings, how many were redriven, …
    pub detail: String,
}

/// A worker as it registers itself while it runs (`backlog_worker`): the dashboard's and
/// `backlog workers`' view of which processes work which queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRegistration {
    /// Unique per run: the lease owner (`host:pid` by default) and a random suffix.
    pub id: String,
    /// The machine it runs on.
    pub host: String,
    /// Its process id.
    pub pid: i64,
    /// The backlog version it runs.
    pub version: String,
    /// Its queues with their concurrency, as JSON: `[{"queue": "emails", "concurrency": 10}]`.
    pub queues: String,
    /// Jobs it was running (past their handler's first poll) at its last beat.
    pub running: i64,
    /// When it started (µs).
    pub started_at: i64,
    /// Its last beat (µs).
    pub seen_at: i64,
    /// When its registration runs out unless it beats again: past it, the worker stopped
    /// without saying so (killed, cut off, its machine gone).
    pub expires_at: i64,
}

/// A periodic schedule (`backlog_cron`): what its leader declared of it, and the last tick it
/// fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSchedule {
    /// Its name, unique across processes.
    pub name: String,
    /// What it is: `every 30s`, or its cron expression (`None` until a leader of schema
    /// version 18 declared it).
    pub schedule: Option<String>,
    /// The queue its jobs go to.
    pub queue: Option<String>,
    /// Its jobs' kind, if any.
    pub kind: Option<String>,
    /// The last tick fired (µs; 0: none yet).
    pub last_tick: i64,
    /// Its next tick (µs) when last declared.
    pub next_tick: Option<i64>,
    /// When its leader last declared it (µs): a schedule no worker runs any more keeps an old
    /// one.
    pub declared_at: Option<i64>,
}

/// The actions the audit log records, as [`AuditEntry::action`] names them.
pub const AUDIT_ACTIONS: &[&str] = &[
    "job.bulk",
    "job.cancel",
    "job.delete",
    "job.hold",
    "job.release",
    "job.retry",
    "job.run_now",
    "queue.pause",
    "queue.redrive",
    "queue.resume",
    "queue.settings",
];

/// [`AUDIT_ACTIONS`] as one string, for error messages.
pub const AUDIT_ACTIONS_LIST: &str = "job.bulk, job.cancel, job.delete, job.hold, job.release, job.retry, job.run_now, \
     queue.pause, queue.redrive, queue.resume, queue.settings";

/// Input of [`crate::Backend::audit_list`]: newest first.
#[derive(Debug, Clone)]
pub struct AuditListParams {
    /// Only entries with a smaller id (paging back in time); `i64::MAX` for the newest.
    pub before_id: i64,
    /// Only this queue's.
    pub queue: Option<crate::QueueName>,
    /// Only this actor's (a token's name, `local`, `cli:USER`), exactly.
    pub actor: Option<String>,
    /// Only this action (one of [`AUDIT_ACTIONS`]).
    pub action: Option<String>,
    /// At most this many.
    pub limit: u32,
}

impl AuditListParams {
    /// The newest `limit` entries, of every queue, actor and action.
    pub fn newest(limit: u32) -> Self {
        AuditListParams {
            before_id: i64::MAX,
            queue: None,
            actor: None,
            action: None,
            limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_fall_in_their_buckets() {
        let mut c = StatCounts::default();
        for us in [0, 1_000, 1_001, 50_000, 2_000_000, 61_000_000, -5] {
            c.record_wait(us);
        }
        assert_eq!(c.wait, [3, 1, 1, 0, 1, 0, 1]);
        assert_eq!(
            c.wait_sum_us,
            1_000 + 1_001 + 50_000 + 2_000_000 + 61_000_000
        );
        let mut d = c;
        d.add(&c);
        assert_eq!(d.wait[0], 6);
        assert!(!d.is_empty() && StatCounts::default().is_empty());
        assert_eq!(minute_of(125_000_000), 120_000_000);
    }
}
