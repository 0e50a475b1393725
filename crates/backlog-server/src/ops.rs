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

/// A histogram whose buckets were counted elsewhere (in `backlog_stat`, by every process).
/// Set once per scrape, behind a lock because a family hands its metrics out shared.
#[derive(Debug, Default)]
struct Counted(std::sync::Mutex<CountedData>);

#[derive(Debug, Default)]
struct CountedData {
    sum: f64,
    count: u64,
    /// (upper bound in seconds, jobs in this bucket alone), the last bound infinite.
    buckets: Vec<(f64, u64)>,
}

impl prometheus_client::encoding::EncodeMetric for Counted {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        let d = self.0.lock().expect("lock");
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            d.sum, d.count, &d.buckets, None,
        )
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Histogram
    }
}

impl prometheus_client::metrics::TypedMetric for Counted {
    const TYPE: prometheus_client::metrics::MetricType =
        prometheus_client::metrics::MetricType::Histogram;
}

/// Registers the all-time counts of every queue: counters, and the wait histogram.
fn register_totals(registry: &mut Registry, totals: &[backlog::StatRow]) {
    use prometheus_client::metrics::counter::Counter;
    type Count = fn(&backlog::StatCounts) -> i64;
    let counters: [(&str, &str, Count); 6] = [
        ("jobs_enqueued", "Jobs created", |c| c.enqueued),
        ("jobs_started", "Attempts started (claims)", |c| c.started),
        ("jobs_completed", "Jobs completed", |c| c.completed),
        ("jobs_failed", "Failed attempts (retried or dead)", |c| {
            c.failed
        }),
        ("jobs_dead", "Jobs that ended dead", |c| c.dead),
        ("jobs_rescued", "Expired leases rescued", |c| c.rescued),
    ];
    for (name, help, get) in counters {
        let family = Family::<Labels, Counter>::default();
        for r in totals {
            family
                .get_or_create(&vec![("queue", r.queue.clone())])
                .inc_by(get(&r.counts).max(0) as u64);
        }
        registry.register(name, help, family);
    }
    let waits = Family::<Labels, Counted>::default();
    for r in totals {
        let c = &r.counts;
        let bounds = backlog::WAIT_BOUNDS_US
            .iter()
            .map(|us| *us as f64 / 1e6)
            .chain([f64::MAX]); // printed as +Inf
        let buckets: Vec<(f64, u64)> = bounds
            .zip(c.wait.iter().map(|n| (*n).max(0) as u64))
            .collect();
        let m = waits.get_or_create(&vec![("queue", r.queue.clone())]);
        *m.0.lock().expect("lock") = CountedData {
            sum: c.wait_sum_us as f64 / 1e6,
            count: buckets.iter().map(|b| b.1).sum(),
            buckets,
        };
    }
    registry.register(
        "job_wait_seconds",
        "Time from a job being due to its attempt starting",
        waits,
    );
}

/// Prometheus metrics, read from the database at each scrape so that every `serve` process
/// reports the same numbers: jobs per queue and state, how long each queue's oldest due job has
/// waited, which queues are paused, and counters of what every process did (enqueued, started,
/// completed, failed, dead, rescued) with the wait from due to start as a histogram.
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, description = "OpenMetrics text exposition format (Prometheus reads it)", content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8")),
    security(("bearer" = [])))]
pub async fn metrics(State(state): State<AppState>, _who: Reader) -> ApiResult<Response> {
    let client = &state.client;
    let mut registry = Registry::with_prefix("backlog");

    let jobs = Family::<Labels, Gauge>::default();
    let archived = Family::<Labels, Gauge>::default();
    let all_stats = client.stats(None).await?;
    for (queue, s) in &all_stats {
        archived
            .get_or_create(&vec![("queue", queue.clone())])
            .set(s.archived);
        for (st, n) in [
            ("available", s.available),
            ("scheduled", s.scheduled),
            ("retrying", s.retrying),
            ("running", s.running),
            ("completed", s.completed),
            ("dead", s.dead),
            ("cancelled", s.cancelled),
            ("held", s.held),
            ("waiting", s.waiting),
        ] {
            jobs.get_or_create(&vec![("queue", queue.clone()), ("state", st.into())])
                .set(n);
        }
    }
    registry.register(
        "jobs",
        "Jobs per queue and state (scheduled: available but not yet due; retrying: not yet due after a failed attempt)",
        jobs,
    );

    let lag = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let paused = Family::<Labels, Gauge>::default();
    let queues = client.queues().await?;
    // Flow control: the limits, and the groups held up (read only for the queues that have jobs
    // waiting in groups or a group rate limit).
    let limit = Family::<Labels, Gauge>::default();
    let rate = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let blocked = Family::<Labels, Gauge>::default();
    let waiting: std::collections::HashSet<&str> = (all_stats.iter())
        .filter(|(_, s)| s.waiting > 0)
        .map(|(q, _)| q.as_str())
        .collect();
    for q in &queues {
        let s = &q.settings;
        let name = s.name.as_str().to_owned();
        if let Some(n) = s.global_concurrency {
            limit
                .get_or_create(&vec![("queue", name.clone())])
                .set(i64::from(n));
        }
        for (scope, r) in [("queue", s.rate_limit), ("group", s.group_rate_limit)] {
            if let Some(r) = r {
                let per_second = f64::from(r.starts) / r.period.as_secs_f64();
                rate.get_or_create(&vec![("queue", name.clone()), ("scope", scope.into())])
                    .set(per_second);
            }
        }
        if waiting.contains(name.as_str()) || s.group_rate_limit.is_some() {
            let flow = client.queue_flow(&s.name).await?;
            for reason in [backlog::BlockReason::Retry, backlog::BlockReason::Rate] {
                let n = flow.blocked.iter().filter(|b| b.reason == reason).count();
                blocked
                    .get_or_create(&vec![
                        ("queue", name.clone()),
                        ("reason", reason.as_str().into()),
                    ])
                    .set(n as i64);
            }
        }
    }
    registry.register(
        "queue_global_concurrency",
        "The queue's global concurrency limit (jobs running at once over every process), where set",
        limit,
    );
    registry.register(
        "queue_rate_limit_per_second",
        "The queue's rate limit in job starts per second over every process (scope queue), and its limit in each ordered group (scope group), where set",
        rate,
    );
    registry.register(
        "queue_groups_blocked",
        "Ordered groups held up by their next job not being due: a failed job waiting to retry (reason retry) or the group's rate limit (reason rate); at most 20 counted",
        blocked,
    );
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
    registry.register(
        "jobs_archived",
        "Jobs moved to backlog_job_archive by retention archive",
        archived,
    );
    register_totals(&mut registry, &client.totals().await?);
    // Reading other sessions may need a privilege the database user lacks (MySQL: PROCESS):
    // then this one metric is left out, not the whole scrape.
    let oldest = client.oldest_transaction().await.unwrap_or_else(|e| {
        tracing::debug!(error = %e, "oldest transaction not readable");
        None
    });
    if let Some(t) = oldest {
        let oldest = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        oldest
            .get_or_create(&vec![
                ("pid", t.pid.to_string()),
                ("state", t.state),
                ("client", t.client),
            ])
            .set(t.age.as_secs_f64());
        registry.register(
            "db_oldest_transaction_seconds",
            "Age of the oldest transaction another session holds open (it keeps completed jobs' rows from being reclaimed)",
            oldest,
        );
    }
    if client.time_source() == backlog::TimeSource::Database {
        let offset = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        offset.set(client.clock_offset() as f64 / 1e6);
        registry.register(
            "clock_offset_seconds",
            "The database's clock minus this server's, as last measured (backlog reads the database's time)",
            offset,
        );
    }

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

/// One worker process's own metrics in the Prometheus text format: `backlog_worker_running_jobs`
/// and `backlog_worker_concurrency` per queue, `backlog_worker_claim_seconds` (each claim's round
/// trip, with the completions it carried), and the outcomes this process recorded
/// (`backlog_worker_jobs_{completed,failed,released,lost}_total`), and `backlog_clock_offset_seconds`
/// when the process reads the database's time. `backlog work --metrics ADDR`
/// serves it; an application embedding a [`backlog::Worker`] can serve it the same way.
pub fn worker_metrics(m: &backlog::WorkerMetrics) -> String {
    use prometheus_client::metrics::counter::Counter;
    let mut root = Registry::default();
    if let Some(seconds) = m.clock_offset_seconds {
        // The same series as `serve`'s /metrics.
        let offset = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        offset.set(seconds);
        root.sub_registry_with_prefix("backlog").register(
            "clock_offset_seconds",
            "The database's clock minus this process's, as last measured (backlog reads the database's time)",
            offset,
        );
    }
    let registry = root.sub_registry_with_prefix("backlog_worker");
    let running = Family::<Labels, Gauge>::default();
    let concurrency = Family::<Labels, Gauge>::default();
    for q in &m.queues {
        let labels = vec![("queue", q.queue.clone())];
        running.get_or_create(&labels).set(q.running as i64);
        concurrency.get_or_create(&labels).set(q.concurrency as i64);
    }
    registry.register(
        "running_jobs",
        "Jobs of the queue this process holds",
        running,
    );
    registry.register(
        "concurrency",
        "Most jobs of the queue this process runs at once",
        concurrency,
    );
    let claims = Counted::default();
    *claims.0.lock().expect("lock") = CountedData {
        sum: m.claim_seconds_sum,
        count: m.claims,
        buckets: m
            .claim_buckets
            .iter()
            .map(|(b, n)| (if b.is_infinite() { f64::MAX } else { *b }, *n))
            .collect(),
    };
    registry.register(
        "claim_seconds",
        "Each claim's round trip, with the completions it carried",
        claims,
    );
    for (name, help, n) in [
        ("jobs_completed", "Jobs this process completed", m.completed),
        (
            "jobs_failed",
            "Failed attempts this process recorded",
            m.failed,
        ),
        (
            "jobs_released",
            "Jobs this process released (shutdown, snooze)",
            m.released,
        ),
        (
            "jobs_lost",
            "Outcomes refused because the lease was gone",
            m.lost,
        ),
    ] {
        let c = Counter::<u64>::default();
        c.inc_by(n);
        registry.register(name, help, c);
    }
    let mut body = String::new();
    encode(&mut body, &root).expect("writing to a String does not fail");
    body
}

/// A router serving [`worker_metrics`] of `worker` at `/metrics` (and `/healthz`).
pub fn worker_router(worker: std::sync::Arc<backlog::Worker>) -> axum::Router {
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let worker = worker.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        worker_metrics(&worker.metrics()),
                    )
                }
            }),
        )
        .route("/healthz", axum::routing::get(healthz))
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
