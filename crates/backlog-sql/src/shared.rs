//! Logic every backend shares around its SQL: tokens, fencing results, state filters, and
//! folding of query results into core types.

use std::collections::BTreeMap;

use backlog_core::{
    AdminAction, Backend, ClaimedJob, DbErrorKind, Due, Error, JobClaimParams, JobFailParams,
    JobRef, JobState, Kind, QueueInfo, QueueName, QueueSettings, QueueStats, Result, StateFilter,
};
use rand::Rng;

/// How often a transaction the database rolled back as a deadlock victim or a serialization
/// failure is run again before the error reaches the caller.
const TRANSIENT_ATTEMPTS: u64 = 10;

/// Runs `op` again while the database rolls it back as a deadlock victim or a serialization
/// failure: the whole transaction was undone, so nothing of it took effect and it can simply go
/// again. Claimers, completers and producers that touch the same rows in different orders can
/// deadlock on any engine with row locks; callers should not see it. Each retry waits a random
/// 1 to 5×n ms (n: the retries so far), so that two victims of one deadlock do not meet again.
/// One policy for every dialect; which errors are transient is `dberror`'s classification.
pub(crate) async fn retry_transient<T, F, Fut>(op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    retry_while(op, |_| false).await
}

/// [`retry_transient`], and also while a statement that bounds its own lock waits (PostgreSQL's
/// folded complete-and-claim: `lock_timeout` set for its transaction) gave up waiting: it was
/// rolled back whole too. Only PostgreSQL's `lock_not_available` (55P03) counts, not a statement
/// timeout, which shares `DbErrorKind::LockTimeout` but says the server may be stalled.
pub(crate) async fn retry_contended<T, F, Fut>(op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    retry_while(op, crate::dberror::lock_not_available).await
}

/// Runs `op` again after a deadlock or serialization failure, or a lock timeout whose driver
/// error `lock_gave_up` accepts, up to [`TRANSIENT_ATTEMPTS`] runs in all.
async fn retry_while<T, F, Fut>(
    mut op: F,
    lock_gave_up: impl Fn(&(dyn std::error::Error + Send + Sync + 'static)) -> bool,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut retries = 0u64;
    loop {
        let again = |r: &Result<T>| match r {
            Err(Error::Database {
                kind: DbErrorKind::Deadlock | DbErrorKind::SerializationFailure,
                ..
            }) => true,
            Err(Error::Database {
                kind: DbErrorKind::LockTimeout,
                source,
            }) => lock_gave_up(source.as_ref()),
            _ => false,
        };
        match op().await {
            r if again(&r) && retries + 1 < TRANSIENT_ATTEMPTS => {
                retries += 1;
                let jitter = rand::random::<u64>() % (5 * retries);
                tokio::time::sleep(std::time::Duration::from_millis(1 + jitter)).await;
            }
            r => return r,
        }
    }
}

/// A fresh lease (fencing) token: random and never zero.
pub(crate) fn new_token() -> i64 {
    loop {
        let t: i64 = rand::rng().random();
        if t != 0 {
            return t;
        }
    }
}

/// Kinds as a JSON array for engines that take lists as JSON (`None` for "any kind").
pub(crate) fn kinds_json(kinds: &[Kind]) -> Option<String> {
    if kinds.is_empty() {
        return None;
    }
    let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    Some(serde_json::to_string(&names).expect("strings serialize"))
}

/// Strings as a JSON array (the list argument of SQLite's `json_each` and MySQL's `JSON_TABLE`).
pub(crate) fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).expect("strings serialize")
}

/// Ids as a JSON array (the list argument of MySQL's `JSON_TABLE`).
pub(crate) fn ids_json(ids: &[i64]) -> String {
    serde_json::to_string(ids).expect("integers serialize")
}

/// The kinds as owned strings (`None` for "any kind").
pub(crate) fn kinds_vec(kinds: &[Kind]) -> Option<Vec<String>> {
    (!kinds.is_empty()).then(|| kinds.iter().map(|k| k.as_str().to_owned()).collect())
}

/// A queue's limits as a claim under them reads them, locked (`queue_lock.sql`): paused,
/// global_concurrency, rate_limit, rate_period_ms, rate_tokens, rate_at, group_rate_limit,
/// group_rate_period_ms.
pub(crate) type LockedLimits = (
    bool,
    Option<i32>,
    Option<i32>,
    i64,
    Option<f64>,
    Option<i64>,
    Option<i32>,
    i64,
);

/// What a claim under a queue's limits may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    paused: bool,
    global: Option<i64>,
    /// (starts, period in µs, tokens now).
    rate: Option<(f64, f64, f64)>,
    /// The rate limit of each ordered group.
    group_rate: Option<backlog_core::RateLimit>,
}

impl Limits {
    /// The limits a locked queue row gives at `now` (no row: none, the limits were lifted).
    pub fn at(row: Option<LockedLimits>, now: i64) -> Self {
        let Some((paused, global, rate, period_ms, tokens, at, group_rate, group_period_ms)) = row
        else {
            return Limits {
                paused: false,
                global: None,
                rate: None,
                group_rate: None,
            };
        };
        let group_rate = group_rate.map(|n| backlog_core::RateLimit {
            starts: n.max(1) as u32,
            period: std::time::Duration::from_millis(group_period_ms.max(1) as u64),
        });
        let rate = rate.map(|n| {
            let (n, period) = (f64::from(n.max(1)), (period_ms.max(1) * 1000) as f64);
            // A full bucket the first time; then what was left, refilled for the time since
            // (never for time going backwards, as between two processes' clocks).
            let level = match (tokens, at) {
                (Some(t), Some(at)) => t + (now - at).max(0) as f64 * n / period,
                _ => n,
            };
            (n, period, level.min(n))
        });
        Limits {
            paused,
            global: global.map(i64::from),
            rate,
            group_rate,
        }
    }

    /// Under a group rate limit, the rate-limit time the groups of jobs a claim at `now` took
    /// move to at least (`group_rate_started.sql`).
    pub fn group_started_by(&self, now: i64) -> Option<i64> {
        self.group_rate.map(|r| now + r.step())
    }

    /// Whether the room depends on the jobs running now (a global limit, not paused).
    pub fn counts_running(&self) -> bool {
        !self.paused && self.global.is_some()
    }

    /// How many of `asked` jobs the limits let a claim take, with `running` running.
    pub fn room(&self, asked: u32, running: i64) -> i64 {
        if self.paused {
            return 0;
        }
        let mut room = i64::from(asked);
        if let Some(max) = self.global {
            room = room.min(max - running);
        }
        if let Some((_, _, level)) = self.rate {
            room = room.min(level.floor() as i64);
        }
        room.max(0)
    }

    /// The rate limit's bucket to store after taking `taken` tokens, if the queue has one.
    pub fn bucket_after(&self, taken: usize) -> Option<f64> {
        self.rate
            .map(|(_, _, level)| (level - taken as f64).max(0.0))
    }
}

/// Transaction claim mode cannot keep a global concurrency limit: its claims hold a row lock
/// for as long as their job runs, and the limit's lock would have to be held as long.
pub(crate) fn tx_claim_limited(p: &JobClaimParams) -> Result<()> {
    match p.global_limit {
        true => Err(Error::Unsupported(
            "transaction claim mode on a queue with a global concurrency limit",
        )),
        false => Ok(()),
    }
}

/// A write to the rows a transaction claim holds locked: each must be there, as claimed (the
/// lock keeps every other writer off them): a shortfall reads as a lost lease.
pub(crate) fn locked_rows(changed: u64, ids: &[i64]) -> Result<()> {
    match (changed == ids.len() as u64, ids.first()) {
        (false, Some(&job_id)) => Err(Error::LeaseLost { job_id }),
        _ => Ok(()),
    }
}

/// State (as stored), run_at and finished_at a failure leads to.
pub(crate) fn fail_target(p: &JobFailParams) -> (&'static str, i64, Option<i64>) {
    let (state, run_at, finished_at) = p.target();
    (state.as_str(), run_at, finished_at)
}

/// A fenced single-row update: no row changed means the lease is gone.
pub(crate) fn fenced(rows_affected: u64, job_id: i64) -> Result<()> {
    if rows_affected == 0 {
        Err(Error::LeaseLost { job_id })
    } else {
        Ok(())
    }
}

/// The fence of a completion. A batch whose jobs all hold one token (one claim's jobs: how a
/// worker that keeps up completes them) is compared with that one value, instead of each row's
/// token being looked up beside its id, a look-up the database pays for on every row (measured
/// with `scripts/pg_claim_costs.py`; figures in docs/bench-journal/figures-behind-the-code.md).
/// Each row is still fenced on its own: a job of that claim running again under a newer token
/// does not match.
pub(crate) enum Tokens {
    One(i64),
    Each(Vec<i64>),
}

impl Tokens {
    pub fn of(jobs: &[JobRef]) -> Tokens {
        match jobs.first() {
            Some(first) if jobs.iter().all(|j| j.token == first.token) => Tokens::One(first.token),
            _ => Tokens::Each(jobs.iter().map(|j| j.token).collect()),
        }
    }
}

/// The groups of a worker's finished jobs (`groups`: one entry per grouped finished job) whose
/// turn was not handed straight to the group's next job (`handed`, the jobs it went to): promoted
/// the usual way, under their locks. Sorted and distinct, the order group locks are taken in.
pub(crate) fn groups_left(groups: &[String], handed: &[ClaimedJob]) -> Vec<String> {
    let mut left: Vec<&str> = groups.iter().map(String::as_str).collect();
    for group in handed.iter().filter_map(|j| j.group.as_deref()) {
        if let Some(i) = left.iter().position(|g| *g == group) {
            left.swap_remove(i);
        }
    }
    let mut left: Vec<String> = left.into_iter().map(str::to_owned).collect();
    left.sort_unstable();
    left.dedup();
    left
}

/// The jobs among `refs` whose ids are in `ids`.
pub(crate) fn refs_with_ids(refs: &[JobRef], ids: &[i64]) -> Vec<JobRef> {
    refs.iter()
        .filter(|r| ids.contains(&r.id))
        .copied()
        .collect()
}

/// A state filter as (stored state, time mode) for the job_list queries: mode 0 any time,
/// 1 due, 2 not yet due, 3 not yet due after a failed attempt.
pub(crate) fn state_filter(f: Option<StateFilter>) -> (Option<&'static str>, i32) {
    match f {
        None => (None, 0),
        Some(StateFilter::Stored(JobState::Available)) => (Some("available"), 1),
        Some(StateFilter::Stored(s)) => (Some(s.as_str()), 0),
        Some(StateFilter::Scheduled) => (Some("available"), 2),
        Some(StateFilter::Retrying) => (Some("available"), 3),
    }
}

/// The update an admin action makes.
pub(crate) struct AdminTarget {
    pub to: &'static str,
    pub run_at: Option<i64>,
    pub reset_attempts: bool,
    pub finished_at: Option<i64>,
    /// Allowed source states, padded to three by repetition.
    pub from: [&'static str; 3],
}

pub(crate) fn admin_target(action: AdminAction, now: i64) -> AdminTarget {
    let from = action.from_states();
    let pick = |i: usize| from[i.min(from.len() - 1)].as_str();
    AdminTarget {
        to: action.to_state().as_str(),
        run_at: action.run_at(now),
        reset_attempts: action.resets_attempts(),
        finished_at: action.finished_at(now),
        from: [pick(0), pick(1), pick(2)],
    }
}

pub(crate) fn is_unique_violation(e: &Error) -> bool {
    matches!(
        e,
        Error::Database {
            kind: DbErrorKind::UniqueViolation,
            ..
        }
    )
}

/// Redrives dead jobs one at a time, skipping those whose unique key another job now holds.
pub(crate) async fn redrive_one_by_one<B: Backend>(
    backend: &B,
    ids: &[i64],
    now: i64,
) -> Result<u64> {
    let mut n = 0;
    for &id in ids {
        match backend.job_admin(id, AdminAction::Retry, now).await {
            Ok(_) => n += 1,
            Err(e) if is_unique_violation(&e) => {}
            Err(Error::JobStateConflict { .. }) | Err(Error::JobNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Queue list from stored settings and per-queue pending counts.
pub(crate) fn merge_queue_list(
    settings: Vec<QueueSettings>,
    pending: Vec<(String, i64)>,
) -> Result<Vec<QueueInfo>> {
    let mut out: BTreeMap<String, QueueInfo> = settings
        .into_iter()
        .map(|s| {
            (
                s.name.as_str().to_owned(),
                QueueInfo {
                    settings: s,
                    pending: 0,
                },
            )
        })
        .collect();
    for (name, n) in pending {
        if let Some(info) = out.get_mut(&name) {
            info.pending = n;
        } else if let Ok(q) = QueueName::new(name.clone()) {
            // Jobs inserted by plain SQL into a queue with no settings row: defaults apply.
            out.insert(
                name,
                QueueInfo {
                    settings: QueueSettings::defaults(q),
                    pending: n,
                },
            );
        }
    }
    Ok(out.into_values().collect())
}

/// Stats from (queue, state, due flag, archived, count) rows (the flag as
/// [`Due::from_flag`] reads it); `names` are queues to list even when empty. Archived rows count
/// as archived whatever state they finished in.
pub(crate) fn fold_stats(
    names: Vec<String>,
    counts: Vec<(String, String, i64, bool, i64)>,
) -> Result<Vec<(String, QueueStats)>> {
    let mut out: BTreeMap<String, QueueStats> = names
        .into_iter()
        .map(|n| (n, QueueStats::default()))
        .collect();
    for (queue, state, future, archived, n) in counts {
        let s = out.entry(queue).or_default();
        if archived {
            s.archived += n;
            continue;
        }
        let due = Due::from_flag(future).ok_or_else(|| Error::StateInvalid {
            value: format!("due flag {future}"),
        })?;
        s.add(state.parse::<JobState>()?, due, n);
    }
    Ok(out.into_iter().collect())
}
