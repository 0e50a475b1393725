//! `/api/v1/jobs/bulk`: an operator's action on many jobs, run here a page at a time, and how
//! far it has got.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use axum::extract::State;
use axum::http::StatusCode;
use backlog::{
    BulkAction, BulkProgress, JobFilter, JobSelection, Kind, StateFilter, parse_duration,
};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::Admin;
use crate::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};

/// Bulk actions whose progress this process remembers (the newest).
const KEPT: usize = 100;

/// An operator's action on many jobs: the ids given, or every job of a queue that a filter
/// matches. Exactly one of `ids` and `queue`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// retry, cancel, hold, release, run_now or delete: what the one-job action of that name
    /// does.
    pub action: String,
    /// These jobs (1 to 10,000).
    pub ids: Option<Vec<i64>>,
    /// Every job of this queue that the filters below match.
    pub queue: Option<String>,
    /// Only jobs in this state (with `queue`).
    pub state: Option<String>,
    /// Only jobs of this kind (with `queue`).
    pub kind: Option<String>,
    /// Only jobs created longer ago than this, e.g. `1h` (with `queue`).
    pub older_than: Option<String>,
    /// Answer when the action is done (the default), or at once with its id, its progress then
    /// read from `GET /api/v1/jobs/bulk/{id}`.
    pub wait: Option<bool>,
}

/// A bulk action and how far it got.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
pub struct BulkStatus {
    /// Its id in this server process (for `GET /api/v1/jobs/bulk/{id}`).
    pub id: u64,
    /// What it does.
    pub action: String,
    /// The queue whose jobs it takes (none when it names job ids).
    pub queue: Option<String>,
    /// Jobs the selection took so far.
    pub seen: u64,
    /// Jobs the action changed so far (the others were in a state it does not apply to, or
    /// gone).
    pub changed: u64,
    /// Whether it has ended.
    pub done: bool,
    /// Why it stopped early, if it did (the pages before were done).
    pub error: Option<String>,
}

/// The bulk actions this process runs or ran, newest last.
#[derive(Debug, Default)]
pub struct Bulks(Mutex<(u64, VecDeque<BulkStatus>)>);

impl Bulks {
    fn with<R>(&self, f: impl FnOnce(&mut (u64, VecDeque<BulkStatus>)) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn start(&self, action: &str, queue: Option<&str>) -> BulkStatus {
        self.with(|(next, runs)| {
            *next += 1;
            let s = BulkStatus {
                id: *next,
                action: action.to_owned(),
                queue: queue.map(str::to_owned),
                seen: 0,
                changed: 0,
                done: false,
                error: None,
            };
            runs.push_back(s.clone());
            while runs.len() > KEPT {
                runs.pop_front();
            }
            s
        })
    }

    fn update(&self, id: u64, f: impl FnOnce(&mut BulkStatus)) -> Option<BulkStatus> {
        self.with(|(_, runs)| {
            let s = runs.iter_mut().find(|s| s.id == id)?;
            f(s);
            Some(s.clone())
        })
    }

    fn get(&self, id: u64) -> Option<BulkStatus> {
        self.with(|(_, runs)| runs.iter().find(|s| s.id == id).cloned())
    }

    fn progress(&self, id: u64, p: BulkProgress) {
        self.update(id, |s| (s.seen, s.changed) = (p.seen, p.changed));
    }
}

/// Apply retry, cancel, hold, release, run-now or delete to many jobs, a page of 1,000 at a
/// time, each as its one-job action would (jobs in a state the action does not apply to are
/// passed over). Recorded in the audit log as one action, `job.bulk`, with what it took and its
/// counts. With `"wait": false` it answers 202 at once and runs on in this server process.
#[utoipa::path(post, path = "/api/v1/jobs/bulk", tag = "jobs", request_body = BulkRequest,
    responses((status = 200, body = BulkStatus, description = "Done"),
        (status = 202, body = BulkStatus, description = "Started (`wait: false`)"),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such queue")),
    security(("bearer" = [])))]
pub async fn bulk(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(req): ApiJson<BulkRequest>,
) -> ApiResult<(StatusCode, ApiJson<BulkStatus>)> {
    let action: BulkAction = req.action.parse()?;
    let (selection, detail) = selection(&state, &req).await?;
    let queue = match &selection {
        JobSelection::Filter(f) => Some(f.queue.as_str().to_owned()),
        JobSelection::Ids(_) => None,
    };
    let started = state.bulks.start(&req.action, queue.as_deref());
    let id = started.id;
    let run = {
        let state = state.clone();
        async move {
            let bulks = state.bulks.clone();
            let res = state
                .client
                .bulk(action, &selection, |p| bulks.progress(id, p))
                .await;
            let mut detail = detail;
            let error = res.as_ref().err().map(ToString::to_string);
            let end = state.bulks.update(id, |s| {
                s.done = true;
                s.error = error.clone();
            });
            if let Some(s) = &end {
                detail["seen"] = s.seen.into();
                detail["changed"] = s.changed.into();
            }
            if let Some(e) = error {
                detail["error"] = e.into();
            }
            crate::audit(&state, &who, "job.bulk", queue.as_deref(), None, detail).await;
            res.map(|_| end)
        }
    };
    if req.wait == Some(false) {
        tokio::spawn(run);
        return Ok((StatusCode::ACCEPTED, ApiJson(started)));
    }
    let end = run.await?;
    Ok((StatusCode::OK, ApiJson(end.unwrap_or(started))))
}

/// How far a bulk action started by this server process has got.
#[utoipa::path(get, path = "/api/v1/jobs/bulk/{id}", tag = "jobs",
    params(("id" = u64, Path, description = "The id its start answered")),
    responses((status = 200, body = BulkStatus), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn status(
    State(state): State<AppState>,
    _who: Admin,
    ApiPath(id): ApiPath<u64>,
) -> ApiResult<ApiJson<BulkStatus>> {
    state.bulks.get(id).map(ApiJson).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "bulk_not_found",
            format!("no bulk action {id} in this server process (it keeps the last {KEPT})"),
        )
    })
}

/// The jobs a request takes, and the audit entry's detail naming them.
async fn selection(
    state: &AppState,
    req: &BulkRequest,
) -> ApiResult<(JobSelection, serde_json::Value)> {
    let invalid = |msg: &str| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bulk_selection_invalid",
            msg.to_owned(),
        )
    };
    match (&req.ids, &req.queue) {
        (Some(ids), None) => {
            if req.state.is_some() || req.kind.is_some() || req.older_than.is_some() {
                return Err(invalid(
                    "state, kind and older_than filter a queue's jobs: give queue, not ids",
                ));
            }
            if ids.is_empty() || ids.len() > backlog::BULK_MAX_IDS {
                return Err(invalid("ids: 1 to 10,000 job ids"));
            }
            let detail = serde_json::json!({"action": req.action, "ids": ids.len()});
            Ok((JobSelection::Ids(ids.clone()), detail))
        }
        (None, Some(queue)) => {
            let state_filter = req
                .state
                .as_deref()
                .map(str::parse::<StateFilter>)
                .transpose()?;
            let kind = req.kind.clone().map(Kind::new).transpose()?;
            let created_before = match req.older_than.as_deref() {
                Some(d) => Some(state.client.now() - parse_duration(d)?.as_micros() as i64),
                None => None,
            };
            let name = crate::queues::known(state, queue.clone()).await?;
            let detail = serde_json::json!({
                "action": req.action, "state": req.state,
                "kind": kind.as_ref().map(|k| k.as_str()), "older_than": req.older_than,
            });
            let filter = JobFilter {
                queue: name,
                state: state_filter,
                kind,
                created_before,
            };
            Ok((JobSelection::Filter(filter), detail))
        }
        _ => Err(invalid("give either ids or queue")),
    }
}
