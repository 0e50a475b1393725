//! The W3C trace context of API requests: each request runs in an `http.request` span that
//! continues the caller's trace (`traceparent` and `tracestate` headers), and a job enqueued by
//! the request carries that trace on to the handler that runs it.

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use backlog::TraceContext;
use tracing::Instrument as _;

/// The caller's trace context from a request's headers. A malformed `traceparent` is ignored,
/// as the W3C recommendation asks of a receiver (the request is served, untraced).
pub fn incoming(headers: &HeaderMap) -> Option<TraceContext> {
    let parent = headers.get("traceparent")?.to_str().ok()?;
    let state = headers.get("tracestate").and_then(|v| v.to_str().ok());
    TraceContext::new(parent, state).ok()
}

/// The trace context a job enqueued by this request carries: the request's own span when
/// OpenTelemetry is exporting (the client takes it when it enqueues, so `None` here), else the
/// caller's from the headers.
pub fn for_jobs(headers: &HeaderMap) -> Option<TraceContext> {
    match backlog::trace::current() {
        Some(_) => None,
        None => incoming(headers),
    }
}

/// Runs each request in an `http.request` span (INFO, target `backlog_server`) whose parent is
/// the caller's span. The span costs nothing when no subscriber wants it.
pub async fn layer(req: Request, next: Next) -> Response {
    let span = tracing::info_span!(
        target: "backlog_server",
        "http.request",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        http.request.method = %req.method(),
        http.route = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    );
    if span.is_disabled() {
        return next.run(req).await;
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| req.uri().path().to_owned());
    span.record("otel.name", format!("{} {route}", req.method()));
    span.record("http.route", route.as_str());
    if let Some(tc) = incoming(req.headers()) {
        backlog::trace::continue_trace(&span, &tc);
    }
    let response = next.run(req).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_headers_and_ignores_bad_ones() {
        let mut h = HeaderMap::new();
        assert!(incoming(&h).is_none());
        h.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        h.insert("tracestate", "congo=t61rcWkgMzE".parse().unwrap());
        let tc = incoming(&h).unwrap();
        assert_eq!(tc.parent_id(), "00f067aa0ba902b7");
        assert_eq!(tc.tracestate(), Some("congo=t61rcWkgMzE"));
        h.insert("traceparent", "00-nonsense".parse().unwrap());
        assert!(incoming(&h).is_none());
    }
}
