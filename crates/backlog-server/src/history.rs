//! `/api/v1/history` (what happened per minute, for the dashboard's charts),
//! `/api/v1/audit` (who did what) and `/api/v1/workers` (which processes work which queues).
//! All are read from the database, so every `serve` process answers the same, and all survive
//! restarts.

use std::collections::BTreeMap;

use axum::extract::State;
use backlog::view::rfc3339;
use backlog::{AuditListParams, QueueName, StatRow};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::auth::Reader;
use crate::error::{ApiJson, ApiQuery, ApiResult, ErrorBody, count};
use crate::view::json;

/// Most minutes one history request covers (a day).
pub const MAX_MINUTES: u32 = 24 * 60;

/// Which history.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Only this queue (default: every queue, summed).
    pub queue: Option<String>,
    /// How many minutes back, this one included (1 to 1,440; default 60).
    pub minutes: Option<u32>,
}

/// One minute.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct MinuteView {
    /// The minute's start (µs).
    pub minute: i64,
    /// The minute's start.
    pub minute_rfc3339: String,
    /// Jobs created.
    pub enqueued: i64,
    /// Attempts started.
    pub started: i64,
    /// Jobs completed.
    pub completed: i64,
    /// Failed attempts.
    pub failed: i64,
    /// Jobs that ended dead.
    pub dead: i64,
    /// Expired leases rescued.
    pub rescued: i64,
    /// Mean wait from due to start of the attempts started (seconds; absent when none).
    pub mean_wait_seconds: Option<f64>,
    /// Available and due, as sampled in that minute (absent: no sample).
    pub available: Option<i64>,
    /// Due later, as sampled.
    pub scheduled: Option<i64>,
    /// Running, as sampled.
    pub running: Option<i64>,
    /// Dead in the job table, as sampled.
    pub dead_total: Option<i64>,
}

/// Every minute of the span, oldest first (minutes nothing happened in count zero).
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryView {
    /// The minutes.
    pub minutes: Vec<MinuteView>,
}

fn add_depth(slot: &mut Option<i64>, v: i64) {
    *slot = Some(slot.unwrap_or(0) + v);
}

/// Sums rows into one view per minute from `since` to `last`, every minute present.
fn per_minute(rows: &[StatRow], since: i64, last: i64) -> Vec<MinuteView> {
    let mut by: BTreeMap<i64, (MinuteView, i64)> = BTreeMap::new();
    let mut m = since;
    while m <= last {
        let view = MinuteView {
            minute: m,
            minute_rfc3339: rfc3339(m),
            ..Default::default()
        };
        by.insert(m, (view, 0));
        m += 60_000_000;
    }
    for r in rows {
        let Some((v, wait_sum)) = by.get_mut(&r.minute) else {
            continue;
        };
        let c = &r.counts;
        v.enqueued += c.enqueued;
        v.started += c.started;
        v.completed += c.completed;
        v.failed += c.failed;
        v.dead += c.dead;
        v.rescued += c.rescued;
        *wait_sum += c.wait_sum_us;
        if let Some(d) = r.depth {
            add_depth(&mut v.available, d.available);
            add_depth(&mut v.scheduled, d.scheduled);
            add_depth(&mut v.running, d.running);
            add_depth(&mut v.dead_total, d.dead);
        }
    }
    by.into_values()
        .map(|(mut v, wait_sum)| {
            v.mean_wait_seconds = (v.started > 0).then(|| wait_sum as f64 / v.started as f64 / 1e6);
            v
        })
        .collect()
}

/// What happened per minute: jobs enqueued, started, completed, failed, dead and rescued
/// (summed over every process), and the depth the leader sampled.
#[utoipa::path(get, path = "/api/v1/history", tag = "queues", params(HistoryQuery),
    responses((status = 200, body = HistoryView), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn history(
    State(state): State<AppState>,
    _who: Reader,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> ApiResult<ApiJson<HistoryView>> {
    let minutes = count("minutes", q.minutes, 60, MAX_MINUTES)?;
    let queue = q.queue.map(QueueName::new).transpose()?;
    let rows = state.client.history(queue.as_ref(), minutes).await?;
    let last = backlog::minute_of(state.client.now());
    let since = last - (minutes as i64 - 1) * 60_000_000;
    Ok(ApiJson(HistoryView {
        minutes: per_minute(&rows, since, last),
    }))
}

/// Which audit entries.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only this queue's.
    pub queue: Option<String>,
    /// Only this actor's (a token's name, `local`, `cli:USER`), exactly.
    pub actor: Option<String>,
    /// Only this action: `job.cancel`, `job.hold`, `job.release`, `job.retry`, `job.run_now`,
    /// `queue.pause`, `queue.redrive`, `queue.resume` or `queue.settings`.
    pub action: Option<String>,
    /// Only entries older than this id (the `next` of the previous page).
    pub before: Option<i64>,
    /// At most this many (1 to 1,000; default 100).
    pub limit: Option<u32>,
}

/// One recorded action.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditView {
    /// Its id.
    pub id: i64,
    /// When (µs).
    pub at: i64,
    /// When.
    pub at_rfc3339: String,
    /// Who: a token's name, `local`, or `cli:USER`.
    pub actor: String,
    /// What: `job.cancel`, `job.hold`, `job.release`, `job.retry`, `job.run_now`,
    /// `queue.pause`, `queue.redrive`, `queue.resume`, `queue.settings`.
    pub action: String,
    /// The queue concerned.
    pub queue: Option<String>,
    /// The job concerned.
    pub job_id: Option<i64>,
    /// Details.
    pub detail: serde_json::Value,
}

/// A page of the audit log, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    /// The entries.
    pub entries: Vec<AuditView>,
    /// Pass as `before` for the next (older) page; absent on the last.
    pub next: Option<i64>,
}

/// The operators' actions, newest first: who did what, when; by queue, actor and action.
#[utoipa::path(get, path = "/api/v1/audit", tag = "queues", params(AuditQuery),
    responses((status = 200, body = AuditPage), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn audit(
    State(state): State<AppState>,
    _who: Reader,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<ApiJson<AuditPage>> {
    let limit = count("limit", q.limit, 100, 1000)?;
    let entries = state
        .client
        .audit_log(&AuditListParams {
            before_id: q.before.unwrap_or(i64::MAX),
            queue: q.queue.map(QueueName::new).transpose()?,
            actor: q.actor,
            action: q.action,
            limit,
        })
        .await?;
    let next = (entries.len() == limit as usize)
        .then(|| entries.last().map(|e| e.id))
        .flatten();
    Ok(ApiJson(AuditPage {
        entries: entries
            .into_iter()
            .map(|e| AuditView {
                id: e.id,
                at: e.at,
                at_rfc3339: rfc3339(e.at),
                actor: e.actor,
                action: e.action,
                queue: e.queue,
                job_id: e.job_id,
                detail: json(&e.detail),
            })
            .collect(),
        next,
    }))
}

/// A queue a worker works, with its concurrency there.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WorkerQueueView {
    /// The queue.
    pub queue: String,
    /// The worker's concurrency on it.
    pub concurrency: u64,
}

/// A worker as it registered itself.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerView {
    /// Unique per run: `host:pid:random`.
    pub id: String,
    /// Its machine.
    pub host: String,
    /// Its process id.
    pub pid: i64,
    /// The backlog version it runs.
    pub version: String,
    /// Its queues.
    pub queues: Vec<WorkerQueueView>,
    /// Jobs it was running (past their handler's first poll) at its last beat.
    pub running: i64,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// Its last beat (µs).
    pub seen_at: i64,
    /// Its last beat (RFC 3339).
    pub seen_at_rfc3339: String,
    /// Whether its registration ran out: it stopped without saying so (killed, cut off).
    pub expired: bool,
}

/// The registered workers.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkersPage {
    /// The longest running first; expired ones are kept an hour.
    pub workers: Vec<WorkerView>,
}

/// Which processes work which queues: every `backlog work` process and library worker writes
/// its registration every 5 s and deletes it when it stops.
#[utoipa::path(get, path = "/api/v1/workers", tag = "queues",
    responses((status = 200, body = WorkersPage)),
    security(("bearer" = [])))]
pub async fn workers(
    State(state): State<AppState>,
    _who: Reader,
) -> ApiResult<ApiJson<WorkersPage>> {
    let now = state.client.now();
    let workers = state.client.workers().await?;
    Ok(ApiJson(WorkersPage {
        workers: workers
            .into_iter()
            .map(|w| WorkerView {
                queues: serde_json::from_str(&w.queues).unwrap_or_default(),
                started_at: rfc3339(w.started_at),
                seen_at_rfc3339: rfc3339(w.seen_at),
                expired: w.expires_at < now,
                id: w.id,
                host: w.host,
                pid: w.pid,
                version: w.version,
                running: w.running,
                seen_at: w.seen_at,
            })
            .collect(),
    }))
}

/// A periodic schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct CronView {
    /// Its name.
    pub name: String,
    /// What it is: `every 30s`, or its cron expression (null until a leader of schema version
    /// 18 declared it).
    pub schedule: Option<String>,
    /// The queue its jobs go to.
    pub queue: Option<String>,
    /// Its jobs' kind.
    pub kind: Option<String>,
    /// The last tick fired (RFC 3339); null when none has.
    pub last_run: Option<String>,
    /// Its next tick (RFC 3339), as last declared.
    pub next_run: Option<String>,
    /// When its leader last declared it (RFC 3339): one no worker runs any more keeps an old one.
    pub declared_at: Option<String>,
}

/// The periodic schedules.
#[derive(Debug, Serialize, ToSchema)]
pub struct CronPage {
    /// By name.
    pub schedules: Vec<CronView>,
}

/// The periodic schedules: what each is, its jobs' queue and kind, its last and next run. The
/// leader declares them every minute, and each one again when it fires.
#[utoipa::path(get, path = "/api/v1/cron", tag = "queues",
    responses((status = 200, body = CronPage)),
    security(("bearer" = [])))]
pub async fn cron(State(state): State<AppState>, _who: Reader) -> ApiResult<ApiJson<CronPage>> {
    let schedules = state.client.cron_schedules().await?;
    Ok(ApiJson(CronPage {
        schedules: schedules
            .into_iter()
            .map(|c| CronView {
                last_run: (c.last_tick > 0).then(|| rfc3339(c.last_tick)),
                next_run: c.next_tick.map(rfc3339),
                declared_at: c.declared_at.map(rfc3339),
                name: c.name,
                schedule: c.schedule,
                queue: c.queue,
                kind: c.kind,
            })
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use backlog::{StatCounts, StatDepth};

    #[test]
    fn minutes_are_summed_over_queues_and_gaps_filled() {
        let row = |queue: &str, minute, completed, depth| StatRow {
            queue: queue.into(),
            minute,
            counts: StatCounts {
                completed,
                started: 2,
                wait_sum_us: 3_000_000,
                ..Default::default()
            },
            depth,
        };
        let d = StatDepth {
            available: 5,
            ..Default::default()
        };
        let rows = vec![
            row("a", 60_000_000, 1, Some(d)),
            row("b", 60_000_000, 2, Some(d)),
            row("a", 180_000_000, 4, None),
        ];
        let v = per_minute(&rows, 60_000_000, 180_000_000);
        assert_eq!(v.len(), 3);
        assert_eq!((v[0].completed, v[0].available), (3, Some(10)));
        assert_eq!(v[0].mean_wait_seconds, Some(1.5));
        assert_eq!(
            (v[1].completed, v[1].available, v[1].mean_wait_seconds),
            (0, None, None)
        );
        assert_eq!(v[2].completed, 4);
        assert!(v[2].minute_rfc3339.starts_with("1970-01-01T00:03:00"));
    }
}
