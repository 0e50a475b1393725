//! Decoding rows into core types; written once as macros because each driver has its own row type.

use backlog_core::{Error, ErrorRecord, JobState};

/// Parses a stored state, refusing anything outside the closed set.
pub(crate) fn state(s: &str) -> Result<JobState, Error> {
    s.parse()
}

/// Parses the error history; a history written by hand that does not parse reads as empty.
pub(crate) fn errors(text: Option<String>) -> Vec<ErrorRecord> {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Reads a stored trace context; one that does not parse reads as none.
pub(crate) fn trace_context(text: Option<String>) -> Option<backlog_core::TraceContext> {
    text.as_deref()
        .and_then(backlog_core::TraceContext::from_json)
}

/// One job of `job_claim_json_fifo.sql`'s array (SQLite): the columns of a claim's row, in the
/// order `claimed_from_row!` reads them.
type ClaimedJson = (
    i64,
    Option<String>,
    String,
    i16,
    i32,
    Option<i32>,
    i64,
    i64,
    Option<String>,
    Option<String>,
);

/// The jobs of one claim from `job_claim_json_fifo.sql`'s JSON array; the queue, token and lease
/// expiry are the claim's own, as in `claimed_from_row!`.
pub(crate) fn claimed_from_json(
    text: &str,
    queue: &str,
    token: i64,
    expires: i64,
) -> Result<Vec<backlog_core::ClaimedJob>, Error> {
    let rows: Vec<ClaimedJson> = serde_json::from_str(text)
        .map_err(|e| crate::dberror::db(sqlx::Error::Decode(Box::new(e))))?;
    Ok(rows
        .into_iter()
        .map(|r| backlog_core::ClaimedJob {
            id: r.0,
            queue: queue.to_owned(),
            kind: r.1,
            payload: r.2,
            priority: r.3,
            attempt: r.4,
            max_attempts: r.5,
            lease_token: token,
            lease_expires_at: expires,
            run_at: r.6,
            created_at: r.7,
            trace_context: trace_context(r.8),
            group: r.9,
        })
        .collect())
}

/// The columns every query that returns whole jobs selects, in this order.
macro_rules! job_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        backlog_core::Job {
            id: row.try_get("id").db()?,
            queue: row.try_get("queue").db()?,
            kind: row.try_get("kind").db()?,
            state: $crate::rows::state(row.try_get::<String, _>("state").db()?.as_str())?,
            payload: row.try_get("payload").db()?,
            priority: row.try_get("priority").db()?,
            run_at: row.try_get("run_at").db()?,
            attempt: row.try_get("attempt").db()?,
            max_attempts: row.try_get("max_attempts").db()?,
            lease_token: row.try_get("lease_token").db()?,
            lease_owner: row.try_get("lease_owner").db()?,
            lease_expires_at: row.try_get("lease_expires_at").db()?,
            unique_key: row.try_get("unique_key").db()?,
            errors: $crate::rows::errors(row.try_get("errors").db()?),
            result: row.try_get("result").db()?,
            progress: row.try_get("progress").db()?,
            created_at: row.try_get("created_at").db()?,
            attempted_at: row.try_get("attempted_at").db()?,
            finished_at: row.try_get("finished_at").db()?,
            cancel_requested_at: row.try_get("cancel_requested_at").db()?,
            trace_context: $crate::rows::trace_context(row.try_get("trace_context").db()?),
            group: row.try_get("group_key").db()?,
            archived: false,
            // Read where the statement returns it (the job table's rows of job_get, job_list):
            // 0 for a job that waits for none, and for one kept elsewhere (finished).
            deps_left: row.try_get::<i32, _>("deps_left").unwrap_or(0),
        }
    }};
}

/// A claimed job from a claim's row. Every claim statement returns, in this order, in every
/// dialect: id, kind, payload, priority, attempt, max_attempts, run_at, created_at,
/// trace_context, group_key. Read by
/// position: by name, every column of every row is a hashed name look-up, which showed under
/// `perf` in the PostgreSQL claim (figures in docs/bench-journal/figures-behind-the-code.md). The
/// queue, token and lease expiry are the claim's own (`$claim`, a `JobClaimParams`; `$token`;
/// `$expires`) and are not sent back: each column read costs the client about as much as the
/// database. `$first` is the position of `id` when the statement returns something before these
/// columns.
macro_rules! claimed_from_row {
    ($row:expr, $first:expr, $claim:expr, $token:expr, $expires:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let at: usize = $first;
        backlog_core::ClaimedJob {
            id: row.try_get(at).db()?,
            queue: $claim.queue.as_str().to_owned(),
            kind: row.try_get(at + 1).db()?,
            payload: row.try_get(at + 2).db()?,
            priority: row.try_get(at + 3).db()?,
            attempt: row.try_get(at + 4).db()?,
            max_attempts: row.try_get(at + 5).db()?,
            lease_token: $token,
            lease_expires_at: $expires,
            run_at: row.try_get(at + 6).db()?,
            created_at: row.try_get(at + 7).db()?,
            trace_context: $crate::rows::trace_context(row.try_get(at + 8).db()?),
            group: row.try_get(at + 9).db()?,
        }
    }};
}

/// A `backlog_queue` row.
macro_rules! queue_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let ms = |v: i64| std::time::Duration::from_millis(v.max(0) as u64);
        let rate_limit = |starts: &str, period: &str| -> backlog_core::Result<_> {
            Ok(match row.try_get::<Option<i32>, _>(starts).db()? {
                Some(n) => Some(backlog_core::RateLimit {
                    starts: n.max(1) as u32,
                    period: ms(row.try_get::<i64, _>(period).db()?.max(1)),
                }),
                None => None,
            })
        };
        backlog_core::QueueSettings {
            name: backlog_core::QueueName::new(row.try_get::<String, _>("name").db()?)?,
            paused: row.try_get("paused").db()?,
            max_attempts: row.try_get("max_attempts").db()?,
            backoff_base: ms(row.try_get("backoff_base_ms").db()?),
            backoff_max: ms(row.try_get("backoff_max_ms").db()?),
            lease: ms(row.try_get("lease_ms").db()?),
            order: row.try_get::<String, _>("ordering").db()?.parse()?,
            retention: row.try_get::<String, _>("retention").db()?.parse()?,
            concurrency: row
                .try_get::<Option<i32>, _>("concurrency")
                .db()?
                .map(|c| c.max(1) as u32),
            global_concurrency: row
                .try_get::<Option<i32>, _>("global_concurrency")
                .db()?
                .map(|c| c.max(1) as u32),
            group_concurrency: row.try_get::<i32, _>("group_concurrency").db()?.max(1) as u32,
            group_on_failure: row.try_get::<String, _>("group_on_failure").db()?.parse()?,
            rate_limit: rate_limit("rate_limit", "rate_period_ms")?,
            group_rate_limit: rate_limit("group_rate_limit", "group_rate_period_ms")?,
            shards: row
                .try_get::<i32, _>("shards")
                .db()?
                .clamp(1, i32::from(u16::MAX)) as u16,
        }
    }};
}

pub(crate) use {claimed_from_row, job_from_row, queue_from_row};

/// Orders claimed jobs the way the claim picked them (RETURNING does not promise an order).
pub(crate) fn sort_claimed(jobs: &mut [backlog_core::ClaimedJob], order: backlog_core::Ordering) {
    jobs.sort_by(|a, b| {
        let k = a.priority.cmp(&b.priority);
        let t = (a.run_at, a.id).cmp(&(b.run_at, b.id));
        k.then(match order {
            backlog_core::Ordering::Fifo => t,
            backlog_core::Ordering::Lifo => t.reverse(),
        })
    });
}

/// Maps outcomes of a multi-row insert back to input order. `created` holds the new rows as
/// (id, queue-and-key) in ascending id order, which is input order; `keys[i]` is row i's
/// queue-and-key (see [`unique_slot`]). Returns `None` for rows whose unique key was taken.
pub(crate) fn assign_ids(
    created: &[(i64, Option<String>)],
    keys: &[Option<String>],
) -> Vec<Option<i64>> {
    let created_keys: std::collections::HashSet<&str> =
        created.iter().filter_map(|(_, k)| k.as_deref()).collect();
    let mut ids = created.iter().map(|(id, _)| *id);
    keys.iter()
        .map(|k| match k {
            Some(k) if !created_keys.contains(k.as_str()) => None,
            _ => ids.next(),
        })
        .collect()
}

/// The rows an insert created, read as (id, queue, unique_key), as [`assign_ids`] takes them:
/// (id, queue-and-key) in ascending id order.
pub(crate) fn created(rows: Vec<(i64, String, Option<String>)>) -> Vec<(i64, Option<String>)> {
    let mut created: Vec<(i64, Option<String>)> = rows
        .into_iter()
        .map(|(id, queue, key)| (id, key.map(|k| unique_slot(&queue, &k))))
        .collect();
    created.sort_by_key(|(id, _)| *id);
    created
}

/// The identity of a unique key: keys are unique per queue. NUL cannot occur in either part.
pub(crate) fn unique_slot(queue: &str, key: &str) -> String {
    format!("{queue}\u{0}{key}")
}

/// A `backlog_stat` row, as stat_history and stat_totals select it: queue, minute, the counts
/// in column order, then available, scheduled, running, dead_total (NULL: no sample).
macro_rules! stat_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let n = |i: usize| -> backlog_core::Result<i64> {
            Ok(row.try_get::<Option<i64>, _>(i).db()?.unwrap_or(0))
        };
        let available: Option<i64> = row.try_get(16).db()?;
        backlog_core::StatRow {
            queue: row.try_get(0).db()?,
            minute: row.try_get(1).db()?,
            counts: backlog_core::StatCounts {
                enqueued: n(2)?,
                started: n(3)?,
                completed: n(4)?,
                failed: n(5)?,
                dead: n(6)?,
                rescued: n(7)?,
                wait_sum_us: n(8)?,
                wait: [n(9)?, n(10)?, n(11)?, n(12)?, n(13)?, n(14)?, n(15)?],
            },
            depth: match available {
                None => None,
                Some(available) => Some(backlog_core::StatDepth {
                    available,
                    scheduled: n(17)?,
                    running: n(18)?,
                    dead: n(19)?,
                }),
            },
        }
    }};
}

/// An audit entry, as audit_list selects it: id, at, actor, action, queue, job_id, detail.
macro_rules! audit_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        backlog_core::AuditEntry {
            id: row.try_get(0).db()?,
            at: row.try_get(1).db()?,
            actor: row.try_get(2).db()?,
            action: row.try_get(3).db()?,
            queue: row.try_get(4).db()?,
            job_id: row.try_get(5).db()?,
            detail: row.try_get(6).db()?,
        }
    }};
}
pub(crate) use {audit_from_row, stat_from_row};
