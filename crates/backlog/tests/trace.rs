//! Tracing across the queue: a job enqueued inside a span carries that span's W3C trace
//! context, and the handler's `backlog.job` span continues the trace (the `opentelemetry`
//! feature, spans collected in memory).

mod common;

use std::sync::{Arc, Mutex};

use backlog::{JobContext, Outcome, TraceContext, Worker};
use common::{Engine, TestDb};
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// Each job's id and the trace context its handler saw as current.
type Seen = Arc<Mutex<Vec<(i64, Option<TraceContext>)>>>;

const REMOTE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn job_spans(spans: &[SpanData]) -> Vec<&SpanData> {
    spans.iter().filter(|s| s.name == "backlog.job").collect()
}

// One thread: the subscriber set for this test is the one every task of it sees.
#[tokio::test(flavor = "current_thread")]
async fn the_handler_continues_the_enqueuers_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _guard = tracing::subscriber::set_default(subscriber);

    let db = TestDb::new(Engine::Sqlite).await;
    let c = db.client.clone();
    // 1: inside a traced request; 2: with a context the caller gives; 3: untraced.
    let request = tracing::info_span!("request");
    let in_request = async { c.enqueue(c.new_job("t", &1).unwrap()).await }
        .instrument(request.clone())
        .await
        .unwrap()
        .id;
    let mut given = c.new_job("t", &2).unwrap();
    given.trace_context = Some(TraceContext::new(REMOTE, Some("congo=t61rcWkgMzE")).unwrap());
    let given = c.enqueue(given).await.unwrap().id;
    let untraced = c.enqueue(c.new_job("t", &3).unwrap()).await.unwrap().id;
    drop(request);

    let stored = c.job(in_request).await.unwrap().trace_context.unwrap();
    assert_eq!(
        c.job(given)
            .await
            .unwrap()
            .trace_context
            .unwrap()
            .traceparent(),
        REMOTE
    );
    assert!(c.job(untraced).await.unwrap().trace_context.is_none());

    // What the handler's own code sees as the current trace context, per job.
    let seen: Seen = Default::default();
    let worker = Worker::builder(c.clone())
        .configure(|w| w.maintenance = None)
        .queue("t", 2)
        .fallback_handler({
            let seen = seen.clone();
            move |ctx: JobContext| {
                let seen = seen.clone();
                async move {
                    tokio::task::yield_now().await;
                    seen.lock()
                        .unwrap()
                        .push((ctx.id(), backlog::trace::current()));
                    Ok(Outcome::Complete)
                }
            }
        })
        .build()
        .unwrap();
    assert_eq!(worker.drain().await.unwrap().completed, 3);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();

    let req = spans.iter().find(|s| s.name == "request").unwrap();
    assert_eq!(stored.trace_id(), req.span_context.trace_id().to_string());
    assert_eq!(stored.parent_id(), req.span_context.span_id().to_string());

    let jobs = job_spans(&spans);
    assert_eq!(jobs.len(), 3, "{spans:#?}");
    let id_of = |s: &SpanData| {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == "job.id")
            .map(|kv| kv.value.to_string())
            .unwrap()
    };
    let span_of = |id: i64| *jobs.iter().find(|s| id_of(s) == id.to_string()).unwrap();
    let a = span_of(in_request);
    assert_eq!(a.span_context.trace_id(), req.span_context.trace_id());
    assert_eq!(a.parent_span_id, req.span_context.span_id());
    let b = span_of(given);
    assert_eq!(
        b.span_context.trace_id(),
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
    );
    assert_eq!(
        b.parent_span_id,
        SpanId::from_hex("00f067aa0ba902b7").unwrap()
    );
    assert_eq!(b.span_context.trace_state().header(), "congo=t61rcWkgMzE");
    let u = span_of(untraced);
    assert_ne!(u.span_context.trace_id(), req.span_context.trace_id());
    assert_eq!(u.parent_span_id, SpanId::INVALID);

    // Inside the handler, the current span is the job's: what it enqueues or calls goes on in
    // the same trace.
    for (id, tc) in seen.lock().unwrap().iter() {
        let s = span_of(*id);
        let tc = tc.as_ref().expect("a current trace context in the handler");
        assert_eq!(tc.trace_id(), s.span_context.trace_id().to_string());
        assert_eq!(tc.parent_id(), s.span_context.span_id().to_string());
    }
    assert_eq!(seen.lock().unwrap().len(), 3);
}
