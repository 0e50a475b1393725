//! Everything a database would hold, behind the backend's one lock, and the errors its
//! constraints raise.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use backlog_core::{AuditEntry, DbErrorKind, Error, QueueSettings, StatRow, WakeFn};

use crate::table::Table;

/// The tables of the SQL schema, as plain collections.
#[derive(Default)]
pub(crate) struct State {
    /// `backlog_job` and `backlog_job_archive`.
    pub jobs: Table,
    /// `backlog_queue`: the queues with stored settings.
    pub queues: BTreeMap<String, QueueSettings>,
    /// `backlog_subscription`: (topic, queue).
    pub topics: BTreeSet<(String, String)>,
    /// `backlog_leader`.
    pub leaders: HashMap<String, Leader>,
    /// `backlog_cron`: the last tick fired per schedule.
    pub cron: HashMap<String, i64>,
    /// `backlog_stat`, by (minute, queue): the order `stat_history` reads.
    pub stats: BTreeMap<(i64, String), StatRow>,
    /// `backlog_audit`, by id.
    pub audit: BTreeMap<i64, AuditEntry>,
    /// `backlog_cron`'s declared columns (schedule, queue, kind, next tick), by name.
    pub cron_declared: HashMap<String, backlog_core::CronSchedule>,
    /// `backlog_worker`, by id.
    pub workers: BTreeMap<String, backlog_core::WorkerRegistration>,
    /// Who [`crate::MemoryBackend::listen`]s.
    pub wakes: Vec<WakeFn>,
    /// Queues that got due jobs during the operation under way: woken once the lock is let go.
    pub woken: Vec<String>,
    /// Claims made so far, from which each claim's lease token is drawn.
    claims: u64,
    /// `backlog_queue.rate_tokens` and `rate_at`: each rate-limited queue's token bucket.
    pub rate: HashMap<String, (f64, i64)>,
    /// `backlog_group.rate_at`, by (queue, group): each group's rate-limit arrival time.
    pub group_rate: HashMap<(String, String), i64>,
    /// `backlog_job_dep`, by parent: the jobs waiting for it, each with its failure policy. A
    /// job with an entry is one with `has_dependents` set.
    pub deps: HashMap<i64, Vec<(i64, backlog_core::OnParentFailure)>>,
}

/// A `backlog_leader` row.
#[derive(Debug, Clone)]
pub(crate) struct Leader {
    pub holder: String,
    pub term: i64,
    pub expires_at: i64,
}

/// Counts, not rows: a client that prints its backend should not print every job.
impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("jobs", &self.jobs.rows().count())
            .field("archived", &self.jobs.archive_rows().count())
            .field("queues", &self.queues.len())
            .field("wakes", &self.wakes.len())
            .finish_non_exhaustive()
    }
}

impl State {
    /// A fresh lease token: deterministic, never zero, never repeated, and unlike a counter
    /// not a small number that a made-up token in a test would hit by chance.
    pub fn new_token(&mut self) -> i64 {
        loop {
            self.claims += 1;
            // SplitMix64's finalizer: a bijection of u64, so distinct counts give distinct tokens.
            let mut z = self.claims.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let token = (z ^ (z >> 31)) as i64;
            if token != 0 {
                return token;
            }
        }
    }

    /// Notes that `queue` has a job that is due: its workers are woken after the operation.
    pub fn woke(&mut self, queue: &str) {
        if !self.woken.iter().any(|q| q == queue) {
            self.woken.push(queue.to_owned());
        }
    }
}

/// What the SQL backends return when a row breaks a CHECK constraint.
pub(crate) fn check_violation(what: String) -> Error {
    Error::Database {
        kind: DbErrorKind::ConstraintViolation,
        source: format!("CHECK constraint failed: {what}").into(),
    }
}

/// What the SQL backends return when a row would take a unique key another row holds.
pub(crate) fn unique_violation(queue: &str, key: &str, holder: i64) -> Error {
    Error::Database {
        kind: DbErrorKind::UniqueViolation,
        source: format!("unique key {key:?} of queue {queue:?} is held by job {holder}").into(),
    }
}

/// Refuses text that is not JSON, as SQLite does: a JSON column's CHECK constraint raises a
/// constraint violation, its `json()` function (`backlog_audit.detail`) a plain error.
pub(crate) fn check_json(column: &str, text: &str, kind: DbErrorKind) -> backlog_core::Result<()> {
    match serde_json::from_str::<&serde_json::value::RawValue>(text) {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::Database {
            kind,
            source: format!("{column} is malformed JSON: {e}").into(),
        }),
    }
}
