//! What operators and their tools poll: `/healthz`, `/readyz`, `/metrics` and `/openapi.json`.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::Reader;
use crate::error::{ApiError, ApiJson, ApiResult, ErrorBody};

/// The process is alive.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: &'static str,
}

/// The process is alive (it does not touch the database).
#[utoipa::path(get, path = "/healthz", tag = "ops", responses((status = 200, body = Health)))]
pub async fn healthz() -> ApiJson<Health> {
    ApiJson(Health { status: "ok" })
}

/// The database answers and its schema is the one this build needs.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    /// `ok`.
    pub status: &'static str,
    /// The schema version found.
    pub schema_version: i64,
}

/// Ready to serve: the database answers and its schema is at this build's version (503
/// otherwise, with the reason).
#[utoipa::path(get, path = "/readyz", tag = "ops",
    responses((status = 200, body = Ready), (status = 503, body = ErrorBody)))]
pub async fn readyz(State(state): State<AppState>) -> ApiResult<ApiJson<Ready>> {
    let found = state.client.schema_version().await?;
    if found != backlog::SCHEMA_VERSION {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "schema_outdated",
            format!(
                "the schema is at version {found}, this build needs {}: run `backlog migrate`",
                backlog::SCHEMA_VERSION
            ),
        ));
    }
    Ok(ApiJson(Ready {
        status: "ok",
        schema_version: found,
    }))
}

type Labels = Vec<(&'static str, String)>;

/// Prometheus metrics, read from the database at each scrape so that every `serve` process
/// reports the same numbers: jobs per queue and state, how long each queue's oldest due job has
/// waited, and which queues are paused.
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, description = "Prometheus text exposition format", content_type = "text/plain")),
    security(("bearer" = [])))]
pub async fn metrics(State(state): State<AppState>, _who: Reader) -> ApiResult<Response> {
    let client = &state.client;
    let mut registry = Registry::with_prefix("backlog");

    let jobs = Family::<Labels, Gauge>::default();
    for (queue, s) in client.stats(None).await? {
        for (st, n) in [
            ("available", s.available),
            ("scheduled", s.scheduled),
            ("running", s.running),
            ("completed", s.completed),
            ("dead", s.dead),
            ("cancelled", s.cancelled),
            ("held", s.held),
        ] {
            jobs.get_or_create(&vec![("queue", queue.clone()), ("state", st.into())])
                .set(n);
        }
    }
    registry.register(
        "jobs",
        "Jobs per queue and state (scheduled: available but not yet due)",
        jobs,
    );

    let lag = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let paused = Family::<Labels, Gauge>::default();
    let queues = client.queues().await?;
    let waited: std::collections::HashMap<String, std::time::Duration> =
        client.lag().await?.into_iter().collect();
    for q in &queues {
        let name = q.settings.name.as_str().to_owned();
        let secs = waited.get(&name).map_or(0.0, |d| d.as_secs_f64());
        lag.get_or_create(&vec![("queue", name.clone())]).set(secs);
        paused
            .get_or_create(&vec![("queue", name)])
            .set(i64::from(q.settings.paused));
    }
    registry.register(
        "queue_lag_seconds",
        "How long the oldest due available job of each queue has waited (0 when none is due)",
        lag,
    );
    registry.register("queue_paused", "1 when the queue is paused", paused);

    let mut body = String::new();
    encode(&mut body, &registry).map_err(|e| {
        tracing::error!(error = %e, "metrics encoding failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "metrics encoding failed",
        )
    })?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

/// This API's OpenAPI document, generated from the code.
#[utoipa::path(get, path = "/openapi.json", tag = "ops",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn openapi(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.as_str().to_owned(),
    )
        .into_response()
}
