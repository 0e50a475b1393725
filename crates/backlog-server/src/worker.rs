//! The worker protocol over HTTP, for programs that cannot reach the database: claim with a
//! lease, heartbeat, progress, complete, fail. Every call after the claim carries the lease
//! token and is fenced by it exactly as in SQL: a worker whose lease was rescued gets 409
//! `lease_lost` and changes nothing.

use std::time::Duration;

use axum::extract::State;
use backlog::{ClaimOpts, ClaimedJob, FailOutcome, JobRef, JobState, Kind, QueueName};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::Producer;
use crate::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody, count};
use crate::view::ClaimedView;

/// A lease token as sent back: the string the claim gave (a number is accepted too).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Token {
    /// As the claim gave it: a decimal integer.
    Text(String),
    /// As a number (exact only up to 2^53 in JavaScript: prefer the string).
    Number(i64),
}

/// Written by hand: the text form has a pattern, which a derived schema cannot say.
impl utoipa::PartialSchema for Token {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, SchemaFormat, Type};
        use utoipa::openapi::{ObjectBuilder, OneOfBuilder};
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(r"^\s*-?[0-9]{1,19}\s*$"))
                    .description(Some("As the claim gave it: a decimal integer")),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                    .description(Some(
                        "As a number (exact only up to 2^53 in JavaScript: prefer the string)",
                    )),
            )
            .description(Some(
                "A lease token as sent back: the string the claim gave (a number is accepted too)",
            ))
            .into()
    }
}

impl ToSchema for Token {}

impl Token {
    fn value(&self) -> Result<i64, ApiError> {
        match self {
            Token::Number(n) => Ok(*n),
            Token::Text(s) => s.trim().parse().map_err(|_| {
                ApiError::bad_request("token_invalid", format!("{s:?} is not a lease token"))
            }),
        }
    }
}

fn duration(what: &str, text: Option<&str>) -> Result<Option<Duration>, ApiError> {
    let Some(t) = text else { return Ok(None) };
    let d = backlog::parse_duration(t)?;
    if d.is_zero() {
        return Err(ApiError::bad_request(
            "value_out_of_range",
            format!("{what} must be longer than zero"),
        ));
    }
    Ok(Some(d))
}

/// What a claim asks for.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// At most this many jobs (1 to 1,000; default 1).
    #[schema(minimum = 1, maximum = 1000)]
    #[serde(default, deserialize_with = "crate::error::whole_number")]
    pub limit: Option<u32>,
    /// Lease length, e.g. `30s` (default: the queue's).
    pub lease: Option<String>,
    /// Only jobs of these kinds.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// The worker's name, recorded as the lease owner (default: the token's name).
    pub worker: Option<String>,
}

/// The jobs claimed (none when nothing is due).
#[derive(Debug, Serialize, ToSchema)]
pub struct ClaimResponse {
    /// The jobs, each with its lease token.
    pub jobs: Vec<ClaimedView>,
}

/// Claim due jobs of a queue, each with a fresh lease.
#[utoipa::path(post, path = "/api/v1/queues/{queue}/claim", tag = "worker",
    params(("queue" = String, Path, description = "The queue")),
    request_body = ClaimRequest,
    responses((status = 200, body = ClaimResponse), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn claim(
    State(state): State<AppState>,
    Producer(who): Producer,
    ApiPath(queue): ApiPath<String>,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> ApiResult<ApiJson<ClaimResponse>> {
    let limit = count("limit", req.limit, 1, 1000)?;
    let kinds = req
        .kinds
        .into_iter()
        .map(Kind::new)
        .collect::<backlog::Result<Vec<_>>>()?;
    let owner = req.worker.unwrap_or_else(|| format!("http:{}", who.name));
    if owner.is_empty() || owner.len() > 255 {
        return Err(ApiError::bad_request(
            "worker_invalid",
            "a worker name is 1 to 255 characters",
        ));
    }
    let mut opts = ClaimOpts::new(&queue)?
        .limit(limit)
        .kinds(kinds)
        .owner(owner);
    if let Some(l) = duration("lease", req.lease.as_deref())? {
        opts = opts.lease(l);
    }
    let jobs = state.client.claim(&opts).await?;
    Ok(ApiJson(ClaimResponse {
        jobs: jobs.iter().map(ClaimedView::from).collect(),
    }))
}

/// A job and its lease token.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeasedRef {
    /// The job's id.
    pub id: i64,
    /// Its lease token.
    pub token: Token,
}

/// Jobs of one queue to complete.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteManyRequest {
    /// The jobs with their lease tokens (1 to 1,000).
    #[schema(min_items = 1, max_items = 1000)]
    pub jobs: Vec<LeasedRef>,
}

/// Which jobs were completed.
#[derive(Debug, Serialize, ToSchema)]
pub struct CompleteManyResponse {
    /// Completed.
    pub completed: Vec<i64>,
    /// Not completed: their lease was gone (rescued and claimed again, or finished).
    pub lost: Vec<i64>,
}

/// Complete many claimed jobs of a queue in one statement; each is fenced by its own token.
#[utoipa::path(post, path = "/api/v1/queues/{queue}/complete", tag = "worker",
    params(("queue" = String, Path, description = "The queue the jobs were claimed from")),
    request_body = CompleteManyRequest,
    responses((status = 200, body = CompleteManyResponse), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn complete_many(
    State(state): State<AppState>,
    _who: Producer,
    ApiPath(queue): ApiPath<String>,
    ApiJson(req): ApiJson<CompleteManyRequest>,
) -> ApiResult<ApiJson<CompleteManyResponse>> {
    let queue = QueueName::new(queue)?;
    if req.jobs.is_empty() || req.jobs.len() > 1000 {
        return Err(ApiError::bad_request(
            "batch_size_invalid",
            format!("send 1 to 1,000 jobs, got {}", req.jobs.len()),
        ));
    }
    let refs = req
        .jobs
        .iter()
        .map(|j| {
            Ok(JobRef {
                id: j.id,
                token: j.token.value()?,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let done = state.client.complete_refs(&queue, refs.clone()).await?;
    let completed: Vec<i64> = done.iter().map(|r| r.id).collect();
    let lost = refs
        .iter()
        .map(|r| r.id)
        .filter(|id| !completed.contains(id))
        .collect();
    Ok(ApiJson(CompleteManyResponse { completed, lost }))
}

/// The running job a token holds, as its claim described it; `lease_lost` if the token is not
/// the job's current one.
async fn held(state: &AppState, id: i64, token: &Token) -> ApiResult<ClaimedJob> {
    let token = token.value()?;
    let j = state.client.job(id).await?;
    if j.state != JobState::Running || j.lease_token != Some(token) {
        return Err(backlog::Error::LeaseLost { job_id: id }.into());
    }
    Ok(ClaimedJob {
        id: j.id,
        queue: j.queue,
        kind: j.kind,
        payload: j.payload,
        priority: j.priority,
        attempt: j.attempt,
        max_attempts: j.max_attempts,
        lease_token: token,
        lease_expires_at: j.lease_expires_at.unwrap_or(0),
        run_at: j.run_at,
        created_at: j.created_at,
        trace_context: j.trace_context,
        group: j.group,
    })
}

/// A completion of one job, with an optional result.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteRequest {
    /// The lease token.
    pub token: Token,
    /// A result to store with the job (kept when the queue keeps or archives completed jobs).
    pub result: Option<Value>,
}

/// A job's new state.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutcomeResponse {
    /// The job.
    pub id: i64,
    /// `completed`, `retry`, `dead` or `cancelled`.
    pub outcome: &'static str,
    /// When it runs again (µs), for `retry`.
    pub retry_at: Option<i64>,
}

/// Complete one claimed job, storing its result.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/complete", tag = "worker",
    params(("id" = i64, Path, description = "The job's id")),
    request_body = CompleteRequest,
    responses((status = 200, body = OutcomeResponse), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn complete(
    State(state): State<AppState>,
    _who: Producer,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<CompleteRequest>,
) -> ApiResult<ApiJson<OutcomeResponse>> {
    let job = held(&state, id, &req.token).await?;
    if let Some(r) = &req.result {
        state.client.set_result(job.job_ref(), r).await?;
    }
    state.client.complete(&job).await?;
    Ok(ApiJson(OutcomeResponse {
        id,
        outcome: "completed",
        retry_at: None,
    }))
}

/// A failed attempt.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailRequest {
    /// The lease token.
    pub token: Token,
    /// What went wrong (kept in the job's error history).
    pub error: String,
    /// Retry after this long, e.g. `10s`, instead of the queue's backoff.
    pub retry_in: Option<String>,
    /// Give up: the job is dead now, whatever attempts remain.
    #[serde(default)]
    pub discard: bool,
}

/// Record a failed attempt: retried with the queue's backoff (or after `retry_in`), dead when
/// attempts are exhausted or `discard` is set.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/fail", tag = "worker",
    params(("id" = i64, Path, description = "The job's id")),
    request_body = FailRequest,
    responses((status = 200, body = OutcomeResponse), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn fail(
    State(state): State<AppState>,
    _who: Producer,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<FailRequest>,
) -> ApiResult<ApiJson<OutcomeResponse>> {
    if req.error.len() > 64 * 1024 {
        return Err(ApiError::bad_request(
            "error_too_long",
            "an error text is at most 64 KiB",
        ));
    }
    if req.discard && req.retry_in.is_some() {
        return Err(ApiError::bad_request(
            "body_invalid",
            "send discard or retry_in, not both",
        ));
    }
    let retry_in = duration("retry_in", req.retry_in.as_deref())?;
    let job = held(&state, id, &req.token).await?;
    let outcome = if req.discard {
        state
            .client
            .fail_with(&job, &req.error, FailOutcome::Dead)
            .await?;
        FailOutcome::Dead
    } else if let Some(d) = retry_in {
        let at = state.client.now() + d.as_micros() as i64;
        let outcome = FailOutcome::Retry { at };
        state.client.fail_with(&job, &req.error, outcome).await?;
        outcome
    } else {
        state.client.fail(&job, &req.error).await?
    };
    Ok(ApiJson(match outcome {
        FailOutcome::Retry { at } => OutcomeResponse {
            id,
            outcome: "retry",
            retry_at: Some(at),
        },
        FailOutcome::Dead => OutcomeResponse {
            id,
            outcome: "dead",
            retry_at: None,
        },
        FailOutcome::Cancelled => OutcomeResponse {
            id,
            outcome: "cancelled",
            retry_at: None,
        },
    }))
}

/// A lease renewal.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The lease token.
    pub token: Token,
    /// The new lease length from now, e.g. `30s` (default: the queue's lease).
    pub lease: Option<String>,
}

/// The renewed lease.
#[derive(Debug, Serialize, ToSchema)]
pub struct HeartbeatResponse {
    /// When the lease now runs out (µs).
    pub lease_expires_at: i64,
    /// An operator asked for the job to be cancelled: stop and fail it.
    pub cancel_requested: bool,
}

/// Extend a job's lease; the answer says whether an operator asked for it to be cancelled.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/heartbeat", tag = "worker",
    params(("id" = i64, Path, description = "The job's id")),
    request_body = HeartbeatRequest,
    responses((status = 200, body = HeartbeatResponse), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn heartbeat(
    State(state): State<AppState>,
    _who: Producer,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<HeartbeatRequest>,
) -> ApiResult<ApiJson<HeartbeatResponse>> {
    let token = req.token.value()?;
    let lease = match duration("lease", req.lease.as_deref())? {
        Some(l) => l,
        None => {
            let j = state.client.job(id).await?;
            state
                .client
                .queue_settings(&QueueName::new(j.queue)?)
                .await?
                .lease
        }
    };
    let hb = state.client.heartbeat(JobRef { id, token }, lease).await?;
    Ok(ApiJson(HeartbeatResponse {
        lease_expires_at: hb.lease_expires_at,
        cancel_requested: hb.cancel_requested,
    }))
}

/// Progress of a running job.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressRequest {
    /// The lease token.
    pub token: Token,
    /// Any JSON value, stored on the job.
    pub progress: Value,
}

/// Store progress on a running job.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/progress", tag = "worker",
    params(("id" = i64, Path, description = "The job's id")),
    request_body = ProgressRequest,
    responses((status = 204), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn progress(
    State(state): State<AppState>,
    _who: Producer,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<ProgressRequest>,
) -> ApiResult<axum::http::StatusCode> {
    let token = req.token.value()?;
    state
        .client
        .progress(JobRef { id, token }, &req.progress)
        .await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
