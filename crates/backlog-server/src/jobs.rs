//! `/api/v1/jobs`: enqueue, inspect, and the operator's actions on one job.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use backlog::{
    AdminAction, GroupKey, JobFilter, JobListOpts, JobSelection, Kind, NewJob, QueueName,
    StateFilter, UniqueKey, parse_duration,
};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::auth::{Admin, Producer, Reader};
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult, ErrorBody, count};
use crate::view::{EnqueuedView, JobPage};
use backlog::view::JobView;

/// Most jobs one batch enqueue takes.
pub const MAX_BATCH: usize = 10_000;
/// Most jobs one page lists.
pub const MAX_PAGE: u32 = 1_000;

/// A job to enqueue. Only `queue` and `payload` are required.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRequest {
    /// The queue (created on first use): 1 to 128 of `A-Z a-z 0-9 _ . : -`.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    pub queue: String,
    /// Any JSON value. Kept as the text sent (no tree is built): stored as it came.
    #[schema(value_type = serde_json::Value)]
    pub payload: Box<serde_json::value::RawValue>,
    /// A kind, for typed handlers and filters: 1 to 128 of `A-Z a-z 0-9 _ . : -`.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    pub kind: Option<String>,
    /// Lower runs first (default 0).
    pub priority: Option<i16>,
    /// Run no earlier than this long from now, e.g. `30s`, `5m`.
    pub delay: Option<String>,
    /// Attempts before the job is dead (default: the queue's).
    pub max_attempts: Option<i32>,
    /// While an unfinished job holds this key, no other is created (1 to 255 bytes).
    #[schema(min_length = 1)]
    pub unique_key: Option<String>,
    /// Its ordered group (1 to 255 bytes): the group's jobs run in enqueue order, at most the
    /// queue's group concurrency at a time.
    #[schema(min_length = 1)]
    pub group: Option<String>,
}

impl EnqueueRequest {
    fn into_job(self, state: &AppState) -> backlog::Result<NewJob> {
        let client = &state.client;
        let mut job = client.new_job(&self.queue, &*self.payload)?;
        job.kind = self.kind.map(Kind::new).transpose()?;
        job.priority = self.priority.unwrap_or(0);
        job.max_attempts = self.max_attempts;
        job.unique_key = self.unique_key.map(UniqueKey::new).transpose()?;
        job.group = self.group.map(GroupKey::new).transpose()?;
        if let Some(d) = self.delay {
            job.run_at = Some(client.now() + parse_duration(&d)?.as_micros() as i64);
        }
        Ok(job)
    }
}

/// Enqueue one job.
///
/// 201 with its id; 409 `unique_key_taken` (with the holder's `job_id`) when an unfinished job
/// holds its unique key.
#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs", request_body = EnqueueRequest,
    responses((status = 201, body = EnqueuedView), (status = 400, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn enqueue(
    State(state): State<AppState>,
    _who: Producer,
    headers: HeaderMap,
    ApiJson(req): ApiJson<EnqueueRequest>,
) -> ApiResult<(StatusCode, ApiJson<EnqueuedView>)> {
    let mut job = req.into_job(&state)?;
    job.trace_context = crate::trace::for_jobs(&headers);
    let out = state.client.enqueue(job).await?;
    if !out.created {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "unique_key_taken",
            format!("job {} holds this unique key and is not finished", out.id),
        )
        .with_job(out.id));
    }
    Ok((StatusCode::CREATED, ApiJson(out.into())))
}

/// Many jobs to enqueue in one transaction.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The jobs (1 to 10,000).
    #[schema(min_items = 1, max_items = 10000)]
    pub jobs: Vec<EnqueueRequest>,
}

/// What a batch enqueue did, in the order sent.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct BatchResponse {
    /// One outcome per job sent; `created` is false where a unique key was taken.
    pub jobs: Vec<EnqueuedView>,
}

/// Enqueue many jobs at once: all or none. Every job is checked before anything is written; the
/// first bad one fails the request (its index is in the message).
#[utoipa::path(post, path = "/api/v1/jobs/batch", tag = "jobs", request_body = BatchRequest,
    responses((status = 200, body = BatchResponse), (status = 400, body = ErrorBody),
              (status = 413, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn enqueue_batch(
    State(state): State<AppState>,
    _who: Producer,
    headers: HeaderMap,
    ApiJson(req): ApiJson<BatchRequest>,
) -> ApiResult<ApiJson<BatchResponse>> {
    let trace_context = crate::trace::for_jobs(&headers);
    if req.jobs.is_empty() || req.jobs.len() > MAX_BATCH {
        return Err(ApiError::bad_request(
            "batch_size_invalid",
            format!(
                "a batch holds 1 to {MAX_BATCH} jobs, got {}",
                req.jobs.len()
            ),
        ));
    }
    let mut jobs = Vec::with_capacity(req.jobs.len());
    for (i, r) in req.jobs.into_iter().enumerate() {
        let mut job = r.into_job(&state).map_err(|e| {
            let mut e = ApiError::from(e);
            e.message = format!("job {i}: {}", e.message);
            e
        })?;
        job.trace_context = trace_context.clone();
        jobs.push(job);
    }
    let out = state.client.enqueue_many(jobs).await?;
    Ok(ApiJson(BatchResponse {
        jobs: out.into_iter().map(Into::into).collect(),
    }))
}

/// Filters and paging of a job list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this state: available, scheduled, retrying, waiting, running, completed, dead,
    /// cancelled, held.
    pub state: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only jobs with this unique key (any queue unless `queue` is given).
    pub unique_key: Option<String>,
    /// Only ids after this one (the `next` of the previous page).
    pub after: Option<i64>,
    /// At most this many (1 to 1,000; default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

impl ListQuery {
    /// The library's filter, checked.
    pub fn opts(&self) -> ApiResult<JobListOpts> {
        let limit = count("limit", self.limit, 100, MAX_PAGE)?;
        Ok(JobListOpts {
            queue: self.queue.clone().map(QueueName::new).transpose()?,
            state: self
                .state
                .as_deref()
                .map(str::parse::<StateFilter>)
                .transpose()?,
            kind: self.kind.clone().map(Kind::new).transpose()?,
            unique_key: self.unique_key.clone().map(UniqueKey::new).transpose()?,
            after_id: self.after.unwrap_or(0),
            limit,
        })
    }
}

/// One page of jobs and the cursor of the next.
pub async fn page(state: &AppState, opts: JobListOpts) -> ApiResult<JobPage> {
    let now = state.client.now();
    let jobs = state.client.job_list(&opts).await?;
    let next = (jobs.len() == opts.limit as usize)
        .then(|| jobs.last().map(|j| j.id))
        .flatten();
    Ok(JobPage {
        jobs: JobView::list(&jobs, now)?,
        next,
    })
}

/// List jobs by queue, state and kind, by id, a page at a time (stable under new inserts:
/// they get higher ids).
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs", params(ListQuery),
    responses((status = 200, body = JobPage), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    _who: Reader,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<ApiJson<JobPage>> {
    Ok(ApiJson(page(&state, q.opts()?).await?))
}

/// One job.
#[utoipa::path(get, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = i64, Path, description = "The job's id")),
    responses((status = 200, body = JobView), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn show(
    State(state): State<AppState>,
    _who: Reader,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<ApiJson<JobView>> {
    let j = state.client.job(id).await?;
    Ok(ApiJson(JobView::of(&j, state.client.now())?))
}

macro_rules! admin_action {
    ($(#[$doc:meta])* $name:ident, $path:literal, $method:ident) => {
        $(#[$doc])*
        #[utoipa::path(post, path = $path, tag = "jobs",
            params(("id" = i64, Path, description = "The job's id")),
            responses((status = 200, body = JobView), (status = 404, body = ErrorBody),
                      (status = 409, body = ErrorBody)),
            security(("bearer" = [])))]
        pub async fn $name(
            State(state): State<AppState>,
            Admin(who): Admin,
            ApiPath(id): ApiPath<i64>,
        ) -> ApiResult<ApiJson<JobView>> {
            let j = state.client.$method(id).await?;
            let action = concat!("job.", stringify!($name));
            crate::audit(&state, &who, action, Some(&j.queue), Some(id), serde_json::json!({"state": j.state.as_str()})).await;
            Ok(ApiJson(JobView::of(&j, state.client.now())?))
        }
    };
}

admin_action!(
    /// Retry a dead, cancelled or completed job now, its attempts reset.
    retry,
    "/api/v1/jobs/{id}/retry",
    retry
);
admin_action!(
    /// Cancel a job; a running one is asked to stop (its worker sees it at the next heartbeat).
    cancel,
    "/api/v1/jobs/{id}/cancel",
    cancel
);
admin_action!(
    /// Hold an available job back (e.g. pending review).
    hold,
    "/api/v1/jobs/{id}/hold",
    hold
);
admin_action!(
    /// Release a held job.
    release,
    "/api/v1/jobs/{id}/release",
    unhold
);
admin_action!(
    /// Run a scheduled job, or one waiting to retry, at once (its attempts kept).
    run_now,
    "/api/v1/jobs/{id}/run-now",
    run_now
);

/// An operator's action on many jobs: the ids given, or every job of a queue that a filter
/// matches. Exactly one of `ids` and `queue`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// retry, cancel, hold, release or run_now: what the one-job action of that name does.
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
}

/// Apply retry, cancel, hold, release or run-now to many jobs, a page of 1,000 at a time, each
/// as its one-job action would (jobs in a state the action does not apply to are passed over).
/// Recorded in the audit log as one action, `job.bulk`, with what it took and its counts.
#[utoipa::path(post, path = "/api/v1/jobs/bulk", tag = "jobs", request_body = BulkRequest,
    responses((status = 200, body = BulkResponse), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such queue")),
    security(("bearer" = [])))]
pub async fn bulk(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(req): ApiJson<BulkRequest>,
) -> ApiResult<ApiJson<BulkResponse>> {
    let action: AdminAction = req.action.parse()?;
    let invalid = |msg: &str| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bulk_selection_invalid",
            msg.to_owned(),
        )
    };
    let (selection, queue) = match (req.ids, req.queue) {
        (Some(ids), None) => {
            if req.state.is_some() || req.kind.is_some() || req.older_than.is_some() {
                return Err(invalid(
                    "state, kind and older_than filter a queue's jobs: give queue, not ids",
                ));
            }
            if ids.is_empty() || ids.len() > backlog::BULK_MAX_IDS {
                return Err(invalid("ids: 1 to 10,000 job ids"));
            }
            (JobSelection::Ids(ids), None)
        }
        (None, Some(queue)) => {
            let state_filter = req
                .state
                .as_deref()
                .map(str::parse::<StateFilter>)
                .transpose()?;
            let kind = req.kind.map(Kind::new).transpose()?;
            let created_before = match req.older_than.as_deref() {
                Some(d) => Some(state.client.now() - parse_duration(d)?.as_micros() as i64),
                None => None,
            };
            let name = crate::queues::known(&state, queue).await?;
            let filter = JobFilter {
                queue: name.clone(),
                state: state_filter,
                kind,
                created_before,
            };
            (JobSelection::Filter(filter), Some(name))
        }
        _ => return Err(invalid("give either ids or queue")),
    };
    let done = state.client.bulk(action, &selection, |_| {}).await?;
    let detail = match &selection {
        JobSelection::Ids(ids) => serde_json::json!({
            "action": req.action, "ids": ids.len(), "seen": done.seen, "changed": done.changed,
        }),
        JobSelection::Filter(f) => serde_json::json!({
            "action": req.action, "state": req.state,
            "kind": f.kind.as_ref().map(|k| k.as_str()), "older_than": req.older_than,
            "seen": done.seen, "changed": done.changed,
        }),
    };
    let queue = queue.as_ref().map(|q| q.as_str());
    crate::audit(&state, &who, "job.bulk", queue, None, detail).await;
    Ok(ApiJson(BulkResponse {
        seen: done.seen,
        changed: done.changed,
    }))
}

/// What a bulk action did.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct BulkResponse {
    /// Jobs the selection took.
    pub seen: u64,
    /// Jobs the action changed (the others were in a state it does not apply to, or gone).
    pub changed: u64,
}
