//! `/api/v1/queues` and `/api/v1/stats`: queue inspection and administration, the dead-letter
//! view and redrive.

use std::collections::BTreeMap;

use axum::extract::State;
use backlog::{JobListOpts, JobState, QueueName, QueueSettings, QueueStats, StateFilter};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::auth::{Admin, Reader};
use crate::error::{ApiJson, ApiPath, ApiQuery, ApiResult, ErrorBody, count};
use crate::jobs::{MAX_PAGE, page};
use crate::view::{FlowView, JobPage, QueueView, SettingsView, StatsView};

/// Every known queue.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueList {
    /// The queues, by name.
    pub queues: Vec<QueueView>,
}

/// Every known queue (with settings, or with jobs), with its counts per state.
#[utoipa::path(get, path = "/api/v1/queues", tag = "queues",
    responses((status = 200, body = QueueList)), security(("bearer" = [])))]
pub async fn list(State(state): State<AppState>, _who: Reader) -> ApiResult<ApiJson<QueueList>> {
    let infos = state.client.queues().await?;
    let stats: BTreeMap<String, QueueStats> = state.client.stats(None).await?.into_iter().collect();
    let mut queues: Vec<QueueView> = infos
        .iter()
        .map(|i| QueueView {
            settings: SettingsView::from(&i.settings),
            stats: StatsView::from(
                &stats
                    .get(i.settings.name.as_str())
                    .cloned()
                    .unwrap_or_default(),
            ),
            flow: None,
        })
        .collect();
    queues.sort_by(|a, b| a.settings.name.cmp(&b.settings.name));
    Ok(ApiJson(QueueList { queues }))
}

/// The queue named, if it exists ([`backlog::Client::queue_known`]): 404 `queue_not_found`
/// otherwise, so that an action on a mistyped name creates nothing.
pub(crate) async fn known(state: &AppState, queue: String) -> ApiResult<QueueName> {
    let name = QueueName::new(queue)?;
    if !state.client.queue_known(&name).await? {
        return Err(crate::error::ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "queue_not_found",
            format!("no such queue: {name} (it has no settings and no jobs)"),
        ));
    }
    Ok(name)
}

async fn view(state: &AppState, name: &QueueName) -> ApiResult<QueueView> {
    let settings = state.client.queue_settings(name).await?;
    let stats = state
        .client
        .stats(Some(name))
        .await?
        .into_iter()
        .next()
        .map(|(_, s)| s)
        .unwrap_or_default();
    let flow = state.client.queue_flow(name).await?;
    Ok(QueueView {
        settings: SettingsView::from(&settings),
        stats: StatsView::from(&stats),
        flow: Some(FlowView::from(&flow)),
    })
}

/// A queue's settings and counts (a queue never configured has the defaults; one with neither
/// settings nor jobs is not found).
#[utoipa::path(get, path = "/api/v1/queues/{queue}", tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    responses((status = 200, body = QueueView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such queue")),
    security(("bearer" = [])))]
pub async fn show(
    State(state): State<AppState>,
    _who: Reader,
    ApiPath(queue): ApiPath<String>,
) -> ApiResult<ApiJson<QueueView>> {
    Ok(ApiJson(view(&state, &known(&state, queue).await?).await?))
}

/// Settings to change; those left out keep their value.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsRequest {
    /// Attempts before a job is dead (1 to 10,000).
    pub max_attempts: Option<i32>,
    /// First retry delay, e.g. `1s`.
    pub backoff_base: Option<String>,
    /// Longest retry delay, e.g. `1h`.
    pub backoff_max: Option<String>,
    /// Lease length, e.g. `30s`.
    pub lease: Option<String>,
    /// `fifo` or `lifo`.
    #[schema(pattern = "^(fifo|lifo)$")]
    pub order: Option<String>,
    /// `delete`, `keep` or `archive`.
    #[schema(pattern = "^(delete|keep|archive)$")]
    pub retention: Option<String>,
    /// Most jobs running at once per worker process (1 to 10,000); `null`: each worker's own.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>)]
    pub concurrency: Option<Option<u32>>,
    /// Most jobs running at once across every process (1 to 1,000,000); `null` lifts the limit.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>)]
    pub global_concurrency: Option<Option<u32>>,
    /// Most jobs of one ordered group available or running at once (1 to 10,000).
    pub group_concurrency: Option<u32>,
    /// `block` or `next`: what a failing job of an ordered group does to its group.
    #[schema(pattern = "^(block|next)$")]
    pub group_on_failure: Option<String>,
    /// At most N job starts per period over every process, `N/PERIOD` (e.g. `100/1m`); `null`
    /// lifts the limit.
    #[serde(default, deserialize_with = "present_text")]
    #[schema(value_type = Option<String>)]
    pub rate_limit: Option<Option<String>>,
    /// At most N job starts per period in each ordered group over every process, `N/PERIOD`
    /// (e.g. `10/1m`); `null` lifts the limit.
    #[serde(default, deserialize_with = "present_text")]
    #[schema(value_type = Option<String>)]
    pub group_rate_limit: Option<Option<String>>,
    /// Claim heads the queue's jobs are spread over (1 to 256; 1: one strict order).
    #[schema(minimum = 1, maximum = 256)]
    pub shards: Option<u16>,
}

/// A text field that may be `null`: absent is `None`, `null` is `Some(None)`.
fn present_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// A field that may be `null`: absent is `None`, `null` is `Some(None)`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<u32>>, D::Error> {
    Option::<u32>::deserialize(d).map(Some)
}

impl SettingsRequest {
    fn apply(&self, s: &mut QueueSettings) -> backlog::Result<()> {
        if let Some(v) = self.max_attempts {
            s.max_attempts = v;
        }
        if let Some(v) = &self.backoff_base {
            s.backoff_base = backlog::parse_duration(v)?;
        }
        if let Some(v) = &self.backoff_max {
            s.backoff_max = backlog::parse_duration(v)?;
        }
        if let Some(v) = &self.lease {
            s.lease = backlog::parse_duration(v)?;
        }
        if let Some(v) = &self.order {
            s.order = v.parse()?;
        }
        if let Some(v) = &self.retention {
            s.retention = v.parse()?;
        }
        if let Some(v) = self.concurrency {
            s.concurrency = v;
        }
        if let Some(v) = self.global_concurrency {
            s.global_concurrency = v;
        }
        if let Some(v) = self.group_concurrency {
            s.group_concurrency = v;
        }
        if let Some(v) = &self.group_on_failure {
            s.group_on_failure = v.parse()?;
        }
        if let Some(v) = &self.rate_limit {
            s.rate_limit = v.as_deref().map(backlog::RateLimit::parse).transpose()?;
        }
        if let Some(v) = &self.group_rate_limit {
            s.group_rate_limit = v.as_deref().map(backlog::RateLimit::parse).transpose()?;
        }
        if let Some(v) = self.shards {
            s.shards = v;
        }
        Ok(())
    }
}

/// Change a queue's settings (the queue is created if new). Every value is checked before
/// anything is stored.
#[utoipa::path(patch, path = "/api/v1/queues/{queue}", tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    request_body = SettingsRequest,
    responses((status = 200, body = QueueView), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn configure(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(queue): ApiPath<String>,
    ApiJson(req): ApiJson<SettingsRequest>,
) -> ApiResult<ApiJson<QueueView>> {
    let name = QueueName::new(queue)?;
    let mut s = state.client.queue_settings_stored(&name).await?;
    req.apply(&mut s)?;
    // Audited by the client, with what changed.
    state.client.queue_configure_by(&s, &who.name).await?;
    tracing::info!(actor = %who.name, action = "queue.settings", queue = %name, "operator action");
    Ok(ApiJson(view(&state, &name).await?))
}

/// Pause a queue: it hands out no jobs until resumed (running jobs go on).
#[utoipa::path(post, path = "/api/v1/queues/{queue}/pause", tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    responses((status = 200, body = QueueView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such queue")),
    security(("bearer" = [])))]
pub async fn pause(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(queue): ApiPath<String>,
) -> ApiResult<ApiJson<QueueView>> {
    let name = known(&state, queue).await?;
    state.client.queue_set_paused(&name, true).await?;
    crate::audit(
        &state,
        &who,
        "queue.pause",
        Some(name.as_str()),
        None,
        serde_json::json!({}),
    )
    .await;
    Ok(ApiJson(view(&state, &name).await?))
}

/// Resume a paused queue.
#[utoipa::path(post, path = "/api/v1/queues/{queue}/resume", tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    responses((status = 200, body = QueueView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such queue")),
    security(("bearer" = [])))]
pub async fn resume(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(queue): ApiPath<String>,
) -> ApiResult<ApiJson<QueueView>> {
    let name = known(&state, queue).await?;
    state.client.queue_set_paused(&name, false).await?;
    crate::audit(
        &state,
        &who,
        "queue.resume",
        Some(name.as_str()),
        None,
        serde_json::json!({}),
    )
    .await;
    Ok(ApiJson(view(&state, &name).await?))
}

/// Paging of the dead-letter view.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeadQuery {
    /// Only ids after this one (the `next` of the previous page).
    pub after: Option<i64>,
    /// At most this many (1 to 1,000; default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// A queue's dead jobs, by id, a page at a time.
#[utoipa::path(get, path = "/api/v1/queues/{queue}/dead", tag = "queues",
    params(("queue" = String, Path, description = "The queue"), DeadQuery),
    responses((status = 200, body = JobPage), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such queue")),
    security(("bearer" = [])))]
pub async fn dead(
    State(state): State<AppState>,
    _who: Reader,
    ApiPath(queue): ApiPath<String>,
    ApiQuery(q): ApiQuery<DeadQuery>,
) -> ApiResult<ApiJson<JobPage>> {
    let limit = count("limit", q.limit, 100, MAX_PAGE)?;
    let opts = JobListOpts {
        queue: Some(known(&state, queue).await?),
        state: Some(StateFilter::Stored(JobState::Dead)),
        kind: None,
        unique_key: None,
        after_id: q.after.unwrap_or(0),
        limit,
    };
    Ok(ApiJson(page(&state, opts).await?))
}

/// How many dead jobs to move back.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedriveRequest {
    /// At most this many (1 to 100,000; default 1,000).
    #[schema(minimum = 1, maximum = 100000)]
    #[serde(default, deserialize_with = "crate::error::whole_number")]
    pub limit: Option<u32>,
}

/// What a redrive did.
#[derive(Debug, Serialize, ToSchema)]
pub struct RedriveResponse {
    /// Dead jobs made available again.
    pub redriven: u64,
}

/// Move a queue's dead jobs back to available, oldest first, attempts reset.
#[utoipa::path(post, path = "/api/v1/queues/{queue}/redrive", tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    request_body = RedriveRequest,
    responses((status = 200, body = RedriveResponse), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such queue")),
    security(("bearer" = [])))]
pub async fn redrive(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(queue): ApiPath<String>,
    ApiJson(req): ApiJson<RedriveRequest>,
) -> ApiResult<ApiJson<RedriveResponse>> {
    // Bad input is a 400 whether or not the queue exists.
    let limit = count("limit", req.limit, 1000, 100_000)?;
    let name = known(&state, queue).await?;
    let n = state.client.redrive(&name, limit).await?;
    let detail = serde_json::json!({"limit": limit, "redriven": n});
    crate::audit(
        &state,
        &who,
        "queue.redrive",
        Some(name.as_str()),
        None,
        detail,
    )
    .await;
    Ok(ApiJson(RedriveResponse { redriven: n }))
}

/// Which queue's counts.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatsQuery {
    /// Only this queue.
    pub queue: Option<String>,
}

/// Job counts per queue and state, as `backlog stats --json` prints them.
#[utoipa::path(get, path = "/api/v1/stats", tag = "queues", params(StatsQuery),
    responses((status = 200, body = BTreeMap<String, StatsView>), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn stats(
    State(state): State<AppState>,
    _who: Reader,
    ApiQuery(q): ApiQuery<StatsQuery>,
) -> ApiResult<ApiJson<BTreeMap<String, StatsView>>> {
    let name = q.queue.map(QueueName::new).transpose()?;
    let rows = state.client.stats(name.as_ref()).await?;
    Ok(ApiJson(
        rows.iter()
            .map(|(n, s)| (n.clone(), StatsView::from(s)))
            .collect(),
    ))
}
