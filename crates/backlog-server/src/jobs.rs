//! `/api/v1/jobs`: enqueue, inspect, and the operator's actions on one job.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use backlog::{
    GroupKey, JobListOpts, Kind, NewJob, QueueName, StateFilter, UniqueKey, parse_duration,
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
    /// The jobs it waits for (at most 1,000, each an existing job): it stays `waiting` until
    /// every one has ended, and is released in the transaction that ends the last of them.
    #[serde(default)]
    pub after: Vec<i64>,
    /// What it does if one of `after` ends dead or cancelled: `cancel` (the default: it is
    /// cancelled, and so are the jobs waiting for it), `run` or `ignore` (it runs once every
    /// parent has ended).
    #[schema(pattern = "^(cancel|run|ignore)$")]
    pub on_parent_failure: Option<String>,
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
        let policy = match self.on_parent_failure.as_deref() {
            Some(p) => backlog::OnParentFailure::parse(p)?,
            None => backlog::OnParentFailure::Cancel,
        };
        for parent in self.after {
            job = job.after_with(parent, policy);
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

/// Delete a job that is not running, wherever it is kept (an archived one too); answers the job
/// as it was. A running job answers 409: cancel it first.
#[utoipa::path(delete, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = i64, Path, description = "The job's id")),
    responses((status = 200, body = JobView), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<ApiJson<JobView>> {
    let j = state.client.delete(id).await?;
    let detail = serde_json::json!({"state": j.state.as_str(), "kind": j.kind});
    crate::audit(&state, &who, "job.delete", Some(&j.queue), Some(id), detail).await;
    Ok(ApiJson(JobView::of(&j, state.client.now())?))
}
