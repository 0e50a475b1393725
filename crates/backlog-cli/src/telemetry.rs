//! Exporting spans to an OpenTelemetry collector (`--otlp-endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT`): OTLP over HTTP with protobuf, batched. Without an endpoint
//! nothing is set up and spans cost nothing.

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::Targets;

/// The spans that are exported: backlog's own (`backlog.job`, `http.request`) and those of
/// handlers' code, at INFO and above.
pub fn span_filter() -> Targets {
    Targets::new()
        .with_target("backlog", tracing::Level::INFO)
        .with_target("backlog_server", tracing::Level::INFO)
}

/// The tracer provider that exports to `endpoint` (a base URL; `/v1/traces` is appended).
/// The service is named by `OTEL_SERVICE_NAME`, else `backlog`.
pub fn provider(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let url = url(endpoint)?;
    // The exporter's blocking HTTP client may not be made or dropped on the async runtime's
    // threads: it is made on a thread of its own, and used by the batch processor's thread.
    std::thread::spawn(move || {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url)
            .with_timeout(std::time::Duration::from_secs(5))
            .with_headers(Default::default())
            .build()
            .context("cannot set up the OTLP exporter")?;
        let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "backlog".to_owned());
        Ok(SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build())
    })
    .join()
    .expect("the exporter set-up does not panic")
}

/// A tracer for the `tracing-opentelemetry` layer.
pub fn tracer(provider: &SdkTracerProvider) -> opentelemetry_sdk::trace::Tracer {
    provider.tracer("backlog")
}

/// Sends the spans still buffered, then stops the exporter (at exit).
pub async fn shutdown(provider: SdkTracerProvider) {
    let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    if let Ok(Err(e)) = done {
        eprintln!("warning: spans not exported at exit: {e}");
    }
}

/// `base` + `/v1/traces`, refusing what is not an http URL.
fn url(base: &str) -> anyhow::Result<String> {
    let base = base.trim().trim_end_matches('/');
    if base.starts_with("https://") {
        anyhow::bail!(
            "invalid OTLP endpoint {base:?}: only http:// is supported; send to a collector \
             next to this process, which forwards over TLS"
        );
    }
    match base.strip_prefix("http://") {
        Some(host) if !host.is_empty() => Ok(format!("{base}/v1/traces")),
        _ => anyhow::bail!(
            "invalid OTLP endpoint {base:?}: give the collector's base URL, e.g. \
             http://localhost:4318"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls() {
        assert_eq!(
            url("http://localhost:4318/").unwrap(),
            "http://localhost:4318/v1/traces"
        );
        assert!(url("localhost:4318").is_err());
        assert!(url("https://collector:4318").is_err());
        assert!(url("http://").is_err());
        assert!(url("").is_err());
    }
}
