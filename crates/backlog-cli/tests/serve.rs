//! `backlog serve` as users run it: a real process on a port, its tokens from a file made by
//! `backlog token new`, the audit log shared with the CLI, a clean stop on SIGTERM, and the
//! refusal to listen openly without tokens.

mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Engine, TestDb};
use serde_json::{Value, json};

/// A `backlog serve` process, killed if the test fails before it stops it.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(db: &TestDb, extra: &[&str]) -> Server {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["serve", "--listen", &listen];
    args.extend_from_slice(extra);
    let child = db
        .cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve starts");
    let server = Server {
        child,
        base: format!("http://{listen}"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if ureq::get(&format!("{}/readyz", server.base)).call().is_ok() {
            return server;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("serve did not become ready on {listen}");
}

/// Status and JSON body, whatever the status.
fn call(req: ureq::Request, body: Option<Value>) -> (u16, Value) {
    let res = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    let res = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("request failed: {e}"),
    };
    let status = res.status();
    (status, res.into_json().unwrap_or(Value::Null))
}

fn serve_with_tokens_and_audit(engine: Engine) {
    let db = TestDb::new(engine);
    // Two tokens made by the command; the file holds only their hashes.
    let mut file = String::new();
    let mut secrets = vec![];
    for (name, scope) in [("ops", "admin"), ("viewer", "read")] {
        let out = db.ok(&["token", "new", name, "--scope", scope]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(
            lines[0].starts_with(&format!("{name} {scope} sha256:")),
            "{out}"
        );
        assert!(
            !lines[0].contains(lines[1]),
            "the file line holds no secret"
        );
        file.push_str(lines[0]);
        file.push('\n');
        secrets.push(lines[1].to_owned());
    }
    let path = db.path("tokens");
    std::fs::write(&path, file).unwrap();
    let server = start(&db, &["--tokens", path.to_str().unwrap()]);
    let url = |p: &str| format!("{}{p}", server.base);
    let bearer = |s: &str| format!("Bearer {s}");

    let (status, _) = call(ureq::get(&url("/api/v1/stats")), None);
    assert_eq!(status, 401);
    let (status, v) = call(
        ureq::post(&url("/api/v1/jobs")).set("Authorization", &bearer(&secrets[1])),
        Some(json!({"queue": "web", "payload": {"a": 1}})),
    );
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let (status, v) = call(
        ureq::post(&url("/api/v1/jobs")).set("Authorization", &bearer(&secrets[0])),
        Some(json!({"queue": "web", "payload": {"a": 1}})),
    );
    assert_eq!(status, 201, "{v}");
    // What the API enqueued, the CLI sees; what the CLI does, the API's audit log shows.
    assert_eq!(db.stats()["web"]["available"], 1);
    db.ok(&["queue", "pause", "web"]);
    let (status, _) = call(
        ureq::post(&url("/api/v1/queues/web/resume")).set("Authorization", &bearer(&secrets[0])),
        None,
    );
    assert_eq!(status, 200);
    let (_, log) = call(
        ureq::get(&url("/api/v1/audit")).set("Authorization", &bearer(&secrets[1])),
        None,
    );
    let e = log["entries"].as_array().unwrap();
    assert_eq!(e.len(), 2, "{log}");
    assert_eq!(
        (&e[0]["action"], &e[0]["actor"]),
        (&json!("queue.resume"), &json!("ops"))
    );
    assert_eq!(e[1]["action"], "queue.pause");
    assert!(e[1]["actor"].as_str().unwrap().starts_with("cli:"), "{log}");
    let cli: Value = serde_json::from_str(&db.ok(&["audit", "--json", "--queue", "web"])).unwrap();
    assert_eq!(cli.as_array().unwrap().len(), 2);
    assert!(db.ok(&["audit"]).contains("queue.resume"));
    db.fails(&["audit", "--queue", "no such"], "invalid queue name");
    // By actor and action; an action that is not one is refused with those there are.
    let ops: Value = serde_json::from_str(&db.ok(&["audit", "--json", "--actor", "ops"])).unwrap();
    assert_eq!(ops.as_array().unwrap().len(), 1, "{ops}");
    assert_eq!(ops[0]["action"], "queue.resume");
    let pauses: Value =
        serde_json::from_str(&db.ok(&["audit", "--json", "--action", "queue.pause"])).unwrap();
    assert_eq!(pauses.as_array().unwrap().len(), 1, "{pauses}");
    assert!(pauses[0]["actor"].as_str().unwrap().starts_with("cli:"));
    db.fails(&["audit", "--action", "queue.delete"], "queue.settings");
    db.fails(&["audit", "--actor", ""], "--actor");
    // The server reads the database's time: its measured offset is on /metrics (this machine
    // and the database share a clock, so it is small).
    let metrics = ureq::get(&url("/metrics"))
        .set("Authorization", &bearer(&secrets[1]))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    let offset: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("backlog_clock_offset_seconds "))
        .unwrap_or_else(|| panic!("no clock offset in\n{metrics}"))
        .parse()
        .unwrap();
    assert!(offset.abs() < 1.0, "{offset}");

    // SIGTERM: it stops by itself, cleanly.
    let mut server = server;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "serve ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn sqlite_serve_with_tokens_and_audit() {
    serve_with_tokens_and_audit(Engine::Sqlite);
}

#[cfg(feature = "servers")]
#[test]
fn postgres_serve_with_tokens_and_audit() {
    serve_with_tokens_and_audit(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_serve_with_tokens_and_audit() {
    serve_with_tokens_and_audit(Engine::MySql);
}

/// `backlog work --metrics`: the process's own jobs in flight, claims and outcomes.
fn worker_metrics(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&["enqueue", "wm", "{}"]);
    db.ok(&["enqueue", "wm", "{}"]);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = db
        .cmd(&[
            "work",
            "wm",
            "--concurrency",
            "2",
            "--drain",
            "--metrics",
            &addr,
            "--",
            "sh",
            "-c",
            "sleep 1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let text = loop {
        assert!(Instant::now() < deadline, "never saw both jobs running");
        if let Ok(r) = ureq::get(&format!("http://{addr}/metrics")).call() {
            let text = r.into_string().unwrap();
            if text.contains(r#"backlog_worker_running_jobs{queue="wm"} 2"#) {
                break text;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        text.contains(r#"backlog_worker_concurrency{queue="wm"} 2"#),
        "{text}"
    );
    assert!(
        text.contains("backlog_worker_claim_seconds_count"),
        "{text}"
    );
    // The worker reads the database's time: its measured offset shows, as on serve's /metrics.
    assert!(text.contains("\nbacklog_clock_offset_seconds "), "{text}");
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the drain ends and the metrics server with it: {status:?}"
    );
    assert_eq!(db.stats()["wm"]["completed"], 2);
}

#[test]
fn sqlite_worker_metrics() {
    worker_metrics(Engine::Sqlite);
}

#[cfg(feature = "servers")]
#[test]
fn postgres_worker_metrics() {
    worker_metrics(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_worker_metrics() {
    worker_metrics(Engine::MySql);
}

/// A short-lived command's counts reach backlog_stat (it adds them as it closes), so jobs
/// enqueued from the command line show in the history and the counters.
fn cli_counts_reach_the_history(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&["enqueue", "cnt", "{}"]);
    let lines = db.path("jobs.jsonl");
    std::fs::write(&lines, "{}\n{}\n{}\n").unwrap();
    db.ok(&["enqueue", "cnt", "--jsonl", lines.to_str().unwrap()]);
    let sum = db.sql("SELECT SUM(enqueued) FROM backlog_stat WHERE queue = 'cnt'");
    assert_eq!(sum.trim(), "4");
}

#[test]
fn sqlite_cli_counts_reach_the_history() {
    cli_counts_reach_the_history(Engine::Sqlite);
}

#[cfg(feature = "servers")]
#[test]
fn postgres_cli_counts_reach_the_history() {
    cli_counts_reach_the_history(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_cli_counts_reach_the_history() {
    cli_counts_reach_the_history(Engine::MySql);
}

/// Bad arguments: a clear error, and nothing listens.
#[test]
fn serve_refuses_bad_setups() {
    let db = TestDb::new(Engine::Sqlite);
    for (args, says) in [
        (
            &["serve", "--listen", "0.0.0.0:0"][..],
            "refusing to listen on 0.0.0.0:0 without tokens",
        ),
        (
            &["serve", "--listen", "localhost"],
            "is not an address to listen on",
        ),
        (
            &["serve", "--listen", "example.com:8080"],
            "is not an address to listen on",
        ),
        (
            &["serve", "--listen", "localhost:99999"],
            "is not a port number",
        ),
        (
            &["serve", "--allow-host", "http://proxy.example:80"],
            "is not a host name",
        ),
    ] {
        db.fails(args, says);
    }
    let bad = db.path("bad-tokens");
    std::fs::write(&bad, "ops superuser 0123456789abcdef0123\n").unwrap();
    db.fails(
        &["serve", "--tokens", bad.to_str().unwrap()],
        "unknown scope \"superuser\"",
    );
    db.fails(
        &["serve", "--tokens", "/no/such/file"],
        "cannot read the tokens file",
    );
    let short = db.path("short-tokens");
    std::fs::write(&short, "ops admin abc\n").unwrap();
    db.fails(
        &["serve", "--tokens", short.to_str().unwrap()],
        "shorter than 16",
    );
    db.fails(&["token", "new", "ops", "--scope", "root"], "unknown scope");
    db.fails(
        &["token", "new", "o/ps", "--scope", "read"],
        "invalid token name",
    );
    db.fails(
        &["work", "q", "--metrics", "nowhere", "--", "true"],
        "invalid socket address",
    );
    // A server on loopback with no tokens answers without a login, on the SQLite default.
    let server = start(&db, &[]);
    let (status, v) = call(ureq::get(&format!("{}/api/v1/stats", server.base)), None);
    assert_eq!((status, v), (200, json!({})));
}

/// A page of another site cannot act through the browser: cross-site writes are refused (403)
/// whether the browser says so (`Sec-Fetch-Site`) or only sends its `Origin`, and a request
/// naming another host (a DNS-rebinding page) is refused (421) before anything runs. Programs
/// that send neither header, and requests naming a host given by `--allow-host`, are served.
/// The browser's own view of it is in dashboard.rs.
#[test]
fn serve_refuses_other_hosts_and_cross_site_writes() {
    let db = TestDb::new(Engine::Sqlite);
    db.ok(&["enqueue", "mail", "{}"]);
    let server = start(&db, &["--allow-host", "Queue.Example.com"]);
    let pause = format!("{}/api/v1/queues/mail/pause", server.base);
    let host = server.base.trim_start_matches("http://").to_owned();
    let refused = [
        (ureq::post(&pause).set("Sec-Fetch-Site", "same-site"), 403),
        (ureq::post(&pause).set("Sec-Fetch-Site", "cross-site"), 403),
        (
            ureq::post(&pause).set("Origin", "http://localhost:9999"),
            403,
        ),
        (ureq::post(&pause).set("Origin", "null"), 403),
        (
            ureq::post(&pause).set("Host", "rebind.attacker.example"),
            421,
        ),
        (
            ureq::get(&format!("{}/api/v1/stats", server.base))
                .set("Host", "rebind.attacker.example:8080"),
            421,
        ),
    ];
    for (req, status) in refused {
        let what = format!("{req:?}");
        let (got, body) = call(req, None);
        assert_eq!(got, status, "{what}: {body}");
        let code = if status == 403 {
            "cross_site_refused"
        } else {
            "host_not_allowed"
        };
        assert_eq!(body["error"]["code"], code, "{what}");
    }
    let paused = || db.ok(&["queue", "show", "mail", "--json"]);
    assert!(paused().contains("\"paused\": false"), "{}", paused());

    // The server's own pages, a program, and a proxy's name are served.
    let (status, _) = call(
        ureq::post(&pause)
            .set("Sec-Fetch-Site", "same-origin")
            .set("Origin", &format!("http://{host}")),
        None,
    );
    assert_eq!(status, 200);
    let resume = format!("{}/api/v1/queues/mail/resume", server.base);
    assert_eq!(call(ureq::post(&resume), None).0, 200);
    let (status, body) = call(
        ureq::get(&format!("{}/api/v1/stats", server.base)).set("Host", "queue.example.com"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    let (status, _) = call(
        ureq::get(&format!("{}/api/v1/stats", server.base))
            .set("Host", &host.replace("127.0.0.1", "localhost")),
        None,
    );
    assert_eq!(status, 200);
    assert!(paused().contains("\"paused\": false"), "{}", paused());
}

/// What lands in a log file or journald is plain text (no ANSI colour codes off a terminal),
/// and a command run where `$USER` and `$LOGNAME` are unset (root in a container) is audited
/// under the name of its user id, not `cli:unknown`.
#[test]
fn logs_off_a_terminal_are_plain_and_the_audit_names_the_user() {
    let db = TestDb::new(Engine::Sqlite);
    db.ok(&["enqueue", "q", "{}"]);
    let out = db
        .cmd(&["queue", "pause", "q"])
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let id = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let name = String::from_utf8(id.stdout).unwrap().trim().to_owned();
    let log = db.ok(&["audit", "--json", "--queue", "q"]);
    assert!(log.contains(&format!("\"cli:{name}\"")), "{log}");

    // A drain of a paused queue ends with a warning (as --help says), written to a pipe here.
    let help = db.ok(&["work", "--help"]);
    assert!(help.contains("paused queue's jobs are left"), "{help}");
    let out = db.run(&["work", "q", "--drain", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("paused"), "{err}");
    assert!(
        !err.contains('\x1b'),
        "colour codes off a terminal: {err:?}"
    );
}

/// A port already taken fails with the reason, and `serve` never says it is serving.
#[test]
fn a_taken_port_is_said_before_serving() {
    let db = TestDb::new(Engine::Sqlite);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let out = db.cmd(&["serve", "--listen", &listen]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("serving"), "{err}");
    assert!(err.contains(&listen), "the address is named: {err}");
}
