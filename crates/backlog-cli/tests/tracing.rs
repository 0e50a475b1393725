//! Tracing across the queue as users run it: `backlog serve` and `backlog work` export spans over
//! OTLP/HTTP to a collector (a small fake one here, decoding the protobuf), and the trace of the
//! request that enqueued a job goes on in the span of the worker that ran it, and in the command
//! that worker ran (`TRACEPARENT`).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Engine, TestDb};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// Spans received, with the service that sent them.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// An OTLP/HTTP collector on a free port: each POST /v1/traces body is decoded and kept.
fn collector() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let got: Received = Default::default();
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let keep = keep.clone();
            std::thread::spawn(move || serve_otlp(conn, keep));
        }
    });
    (base, got)
}

fn serve_otlp(conn: TcpStream, keep: Received) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path_ok = line.starts_with("POST /v1/traces ");
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let status = if path_ok {
            let req = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
            for rs in req.resource_spans {
                let service = rs
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| kv.value.as_ref())
                    .map(|v| format!("{:?}", v.value))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for span in ss.spans {
                        keep.lock().unwrap().push((service.clone(), span));
                    }
                }
            }
            "200 OK"
        } else {
            "404 Not Found"
        };
        let _ = write!(
            conn,
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
    }
}

/// A process killed if the test fails before it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .map(|v| format!("{:?}", v.value))
}

/// Service, name and trace of each span, for failure messages.
fn summary(spans: &[(String, Span)]) -> Vec<(String, String, String)> {
    spans
        .iter()
        .map(|(svc, s)| (svc.clone(), s.name.clone(), hex(&s.trace_id)))
        .collect()
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00f067aa0ba902b7";
const SHELL_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const SHELL_SPAN: &str = "b7ad6b7169203331";

#[test]
fn a_trace_goes_from_the_request_through_the_queue_to_the_command() {
    let (otlp, got) = collector();
    let db = TestDb::new(Engine::Sqlite);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut serve = Proc(
        db.cmd(&["serve", "--listen", &listen])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
            .env("OTEL_SERVICE_NAME", "api")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://{listen}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while ureq::get(&format!("{base}/readyz")).call().is_err() {
        assert!(Instant::now() < deadline, "serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A traced caller enqueues through the API …
    let res = ureq::post(&format!("{base}/api/v1/jobs"))
        .set("traceparent", &format!("00-{TRACE}-{CALLER}-01"))
        .send_json(serde_json::json!({"queue": "tr", "payload": {"n": 1}}))
        .unwrap();
    let api_job = res.into_json::<serde_json::Value>().unwrap()["id"]
        .as_i64()
        .unwrap();
    // … and a shell script enqueues with the CLI, in its own trace.
    db.ok(&[
        "enqueue",
        "tr",
        "{}",
        "--traceparent",
        &format!("00-{SHELL_TRACE}-{SHELL_SPAN}-01"),
    ]);
    let shell_job = 2;
    // A worker runs both; its command writes down the trace context it was given.
    let out = db.path("ctx");
    std::fs::create_dir_all(&out).unwrap();
    let script = format!("echo \"$TRACEPARENT\" > {}/$BACKLOG_JOB_ID", out.display());
    let work = db
        .cmd(&["work", "tr", "--drain", "--", "sh", "-c", &script])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
        .env("OTEL_SERVICE_NAME", "worker")
        .output()
        .unwrap();
    assert!(
        work.status.success(),
        "{}",
        String::from_utf8_lossy(&work.stderr)
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(serve.0.wait().unwrap().success());

    let spans = got.lock().unwrap().clone();
    let request = spans
        .iter()
        .find(|(svc, s)| {
            svc.contains("api") && s.name == "POST /api/v1/jobs" && hex(&s.trace_id) == TRACE
        })
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("no request span in trace {TRACE}: {:?}", summary(&spans)));
    assert_eq!(hex(&request.parent_span_id), CALLER);
    assert!(attr(&request, "http.route").is_some_and(|r| r.contains("/api/v1/jobs")));
    let job_span = |id: i64| {
        spans
            .iter()
            .find(|(svc, s)| {
                svc.contains("worker")
                    && s.name == "backlog.job"
                    && attr(s, "job.id").is_some_and(|v| v.contains(&id.to_string()))
            })
            .map(|(_, s)| s.clone())
            .unwrap_or_else(|| panic!("no span for job {id}: {:?}", summary(&spans)))
    };
    // The worker's span continues the request's trace, under the request's span.
    let ran = job_span(api_job);
    assert_eq!(hex(&ran.trace_id), TRACE);
    assert_eq!(ran.parent_span_id, request.span_id);
    let shell = job_span(shell_job);
    assert_eq!(hex(&shell.trace_id), SHELL_TRACE);
    assert_eq!(hex(&shell.parent_span_id), SHELL_SPAN);
    // The command got the job span's context, so its own spans go on below it.
    let given = std::fs::read_to_string(out.join(api_job.to_string())).unwrap();
    assert_eq!(given.trim(), format!("00-{TRACE}-{}-01", hex(&ran.span_id)));
}

#[test]
fn bad_trace_settings_are_refused() {
    let db = TestDb::new(Engine::Sqlite);
    db.fails(
        &["enqueue", "tr", "{}", "--traceparent", "00-abc-def-01"],
        "invalid trace context",
    );
    db.fails(
        &["--otlp-endpoint", "localhost:4318", "stats"],
        "invalid OTLP endpoint",
    );
    // Nothing was enqueued.
    assert_eq!(
        db.stats()["tr"]["available"],
        serde_json::Value::Null,
        "{}",
        db.stats()
    );
}
