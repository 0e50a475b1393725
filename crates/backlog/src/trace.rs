//! Carrying a trace from the code that enqueues a job to the handler that runs it.
//!
//! A job stores the W3C trace context ([`TraceContext`]) of the span it was enqueued in. The
//! worker runs each handler in a `backlog.job` span; with the `opentelemetry` feature, that span's
//! parent is the stored context, so an exporter (through `tracing-opentelemetry`) shows the
//! handler inside the trace of the request that enqueued it, however long the job waited and
//! whichever process ran it. Without the feature, the span records the `traceparent` as a field
//! (logs can still be joined by it) and nothing is taken from the current span.

use backlog_core::{ClaimedJob, NewJob, TraceContext};

/// The current span's trace context, when the `opentelemetry` feature is on and the span is
/// part of a valid OpenTelemetry trace (a `tracing-opentelemetry` layer is installed); `None`
/// otherwise.
pub fn current() -> Option<TraceContext> {
    #[cfg(feature = "opentelemetry")]
    return otel::current();
    #[cfg(not(feature = "opentelemetry"))]
    return None;
}

/// Makes `span`'s parent the remote span that `tc` names (with the `opentelemetry` feature; a
/// no-op without it). For a server that continues a caller's trace before it enqueues.
pub fn continue_trace(span: &tracing::Span, tc: &TraceContext) {
    #[cfg(feature = "opentelemetry")]
    otel::continue_trace(span, tc);
    #[cfg(not(feature = "opentelemetry"))]
    let _ = (span, tc);
}

#[cfg(feature = "opentelemetry")]
mod otel {
    use backlog_core::TraceContext;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    pub(super) fn current() -> Option<TraceContext> {
        let span = tracing::Span::current();
        if span.is_none() {
            return None;
        }
        let cx = span.context();
        let otel = cx.span();
        let sc = otel.span_context();
        if !sc.is_valid() {
            return None;
        }
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        );
        TraceContext::new(&traceparent, Some(&sc.trace_state().header())).ok()
    }

    pub(super) fn continue_trace(span: &tracing::Span, tc: &TraceContext) {
        let (Ok(trace_id), Ok(span_id)) = (
            TraceId::from_hex(tc.trace_id()),
            SpanId::from_hex(tc.parent_id()),
        ) else {
            return;
        };
        let state = tc
            .tracestate()
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        let sc = SpanContext::new(trace_id, span_id, TraceFlags::new(tc.flags()), true, state);
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(sc));
    }
}

/// Gives the jobs that carry no trace context the current span's, looked up once.
pub(crate) fn stamp(jobs: &mut [NewJob]) {
    if jobs.iter().all(|j| j.trace_context.is_some()) {
        return;
    }
    if let Some(tc) = current() {
        for job in jobs.iter_mut().filter(|j| j.trace_context.is_none()) {
            job.trace_context = Some(tc.clone());
        }
    }
}

/// The span a job's handler runs in: `backlog.job`, at INFO, continuing the job's trace when it
/// carries one. Disabled (and all but free) when no subscriber wants it.
pub(crate) fn job_span(job: &ClaimedJob) -> tracing::Span {
    let span = tracing::info_span!(
        target: "backlog",
        "backlog.job",
        otel.kind = "consumer",
        queue = %job.queue,
        kind = job.kind.as_deref().unwrap_or(""),
        job.id = job.id,
        attempt = job.attempt,
        traceparent = tracing::field::Empty,
    );
    if let Some(tc) = &job.trace_context
        && !span.is_disabled()
    {
        span.record("traceparent", tc.traceparent());
        continue_trace(&span, tc);
    }
    span
}
