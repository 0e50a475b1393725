//! backlog's HTTP face: the JSON API (enqueue, inspect, operate, and the worker protocol for
//! programs that cannot reach the database), Prometheus `/metrics`, health checks, the
//! OpenAPI document and a web dashboard, all from one axum router.
//!
//! Map:
//! - [`ServerConfig`] and [`serve`]: listen, authenticate, answer, shut down gracefully.
//! - [`router`]: the routes, for embedding in your own axum app or testing in-process.
//! - [`auth`]: bearer tokens with `read`, `produce` and `admin` scopes; `/api/v1/me`.
//! - `origin`: refuses other host names (DNS rebinding) and cross-site writes (CSRF).
//! - `dashboard`: the web dashboard at `/`, its assets compiled in (`assets/`).
//! - `jobs`, `queues`, `worker`, `ops`: the handlers; [`view`]: the JSON shapes they answer with.
//! - [`error`]: every error as `{"error": {"code", "message"}}` with a status that means it.
//!
//! # Example
//! ```no_run
//! # async fn f() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! let client = Arc::new(backlog::Client::connect("sqlite://backlog.db").await?);
//! let config = backlog_server::ServerConfig::new("127.0.0.1:8080".parse()?);
//! backlog_server::serve(client, config, backlog::CancellationToken::new()).await?;
//! # Ok(()) }
//! ```

pub mod auth;
mod bulk;
mod dashboard;
pub mod error;
mod history;
mod jobs;
mod ops;
mod origin;
mod queues;
mod responses;
pub mod trace;
pub mod view;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use backlog::{CancellationToken, Client};
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::{Scope, Tokens};
pub use ops::{worker_metrics, worker_router};

/// How `serve` runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The bearer tokens; with none, every request is `admin` and only loopback is allowed.
    pub tokens: Tokens,
    /// Largest request body in bytes (a batch enqueue's size); default 32 MiB.
    pub body_limit: usize,
    /// Host names answered besides those the listen address stands for (`localhost` and
    /// loopback addresses on loopback, the address itself otherwise): the names a reverse proxy
    /// forwards. Requests naming any other host get 421 (a DNS-rebinding page names its own).
    pub allowed_hosts: Vec<String>,
}

impl ServerConfig {
    /// Listen on `listen`, no tokens, the default body limit.
    pub fn new(listen: SocketAddr) -> Self {
        ServerConfig {
            listen,
            tokens: Tokens::default(),
            body_limit: 32 * 1024 * 1024,
            allowed_hosts: Vec::new(),
        }
    }
}

/// Why `serve` could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// No token is configured and the address is not loopback: anyone who reaches it would be
    /// admin.
    #[error(
        "refusing to listen on {0} without tokens: anyone who can reach it could run any \
         action. Configure tokens (--tokens FILE or BACKLOG_API_TOKENS), or listen on \
         127.0.0.1 / [::1]"
    )]
    OpenOnNetwork(SocketAddr),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server stopped with an I/O error.
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    client: Arc<Client>,
    tokens: Arc<Tokens>,
    openapi: Arc<String>,
    bulks: Arc<bulk::Bulks>,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "backlog",
        description = "Durable job queues in the SQL database you already run: enqueue, inspect \
                       and operate queues, and claim and complete jobs over HTTP. Send \
                       `Authorization: Bearer TOKEN`; each operation names the scope it needs \
                       (read, produce or admin)."
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "jobs", description = "Enqueue, inspect and operate on jobs"),
        (name = "queues", description = "Queues, stats, the dead-letter view"),
        (name = "worker", description = "The worker protocol: claim, heartbeat, complete, fail"),
        (name = "ops", description = "Health, readiness, metrics, this document")
    )
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// Records an operator's action in the audit log. The action has happened: a failure to record
/// it is logged, not answered.
pub(crate) async fn audit(
    state: &AppState,
    who: &auth::Caller,
    action: &str,
    queue: Option<&str>,
    job_id: Option<i64>,
    detail: serde_json::Value,
) {
    tracing::info!(actor = %who.name, action, queue, job_id, "operator action");
    if let Err(e) = state
        .client
        .audit(&who.name, action, queue, job_id, detail)
        .await
    {
        tracing::error!(error = %e, action, "the audit log could not record an action");
    }
}

/// Every route, and the OpenAPI document made from the same list (a route cannot be served
/// without being documented).
fn routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(jobs::enqueue, jobs::list))
        .routes(routes!(jobs::enqueue_batch))
        .routes(routes!(bulk::bulk))
        .routes(routes!(bulk::status))
        .routes(routes!(jobs::show, jobs::delete))
        .routes(routes!(jobs::retry))
        .routes(routes!(jobs::cancel))
        .routes(routes!(jobs::hold))
        .routes(routes!(jobs::release))
        .routes(routes!(jobs::run_now))
        .routes(routes!(worker::complete))
        .routes(routes!(worker::fail))
        .routes(routes!(worker::heartbeat))
        .routes(routes!(worker::progress))
        .routes(routes!(queues::list))
        .routes(routes!(queues::show, queues::configure))
        .routes(routes!(queues::pause))
        .routes(routes!(queues::resume))
        .routes(routes!(queues::dead))
        .routes(routes!(queues::redrive))
        .routes(routes!(worker::claim))
        .routes(routes!(worker::complete_many))
        .routes(routes!(queues::stats))
        .routes(routes!(history::history))
        .routes(routes!(history::audit))
        .routes(routes!(history::workers))
        .routes(routes!(history::cron))
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::metrics))
        .routes(routes!(ops::openapi))
        .routes(routes!(auth::me))
        .split_for_parts();
    // After every route is in: the errors each operation can answer.
    utoipa::Modify::modify(&responses::CommonResponses, &mut doc);
    (router, doc)
}

/// The OpenAPI document of this API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes().1
}

/// The router, ready to serve: for tests in-process, or to nest in your own axum app.
pub fn router(client: Arc<Client>, config: &ServerConfig) -> Router {
    let (router, doc) = routes();
    let state = AppState {
        client,
        tokens: Arc::new(config.tokens.clone()),
        openapi: Arc::new(
            doc.to_pretty_json()
                .expect("the OpenAPI document serializes"),
        ),
        bulks: Arc::default(),
    };
    router
        // The dashboard's page and assets are not API: they stay out of the OpenAPI document.
        .route("/", get(dashboard::index))
        .route("/assets/{file}", get(dashboard::asset))
        .layer(DefaultBodyLimit::max(config.body_limit))
        // Other host names and cross-site writes are refused before anything else runs.
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(origin::HostNames::new(config.listen, &config.allowed_hosts)),
            origin::guard,
        ))
        .layer(axum::middleware::from_fn(trace::layer))
        .with_state(state)
}

/// Serves the API until `shutdown` is cancelled, then lets requests in flight finish.
pub async fn serve(
    client: Arc<Client>,
    config: ServerConfig,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let listener = bind(&config).await?;
    serve_on(listener, client, config, shutdown).await
}

/// Binds `config.listen`, refusing a listener open to the network without tokens: what
/// [`serve`] does first, for a caller that says it serves only once the address is taken.
pub async fn bind(config: &ServerConfig) -> Result<tokio::net::TcpListener, ServeError> {
    if config.tokens.is_empty() && !config.listen.ip().is_loopback() {
        return Err(ServeError::OpenOnNetwork(config.listen));
    }
    tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })
}

/// [`serve`] on a listener [`bind`] returned.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    client: Arc<Client>,
    config: ServerConfig,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    tracing::info!(addr = %config.listen, tokens = !config.tokens.is_empty(), "serving");
    let app = router(client, &config);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    Ok(())
}
