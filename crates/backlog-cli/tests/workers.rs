//! The `backlog` command against real databases: plain-SQL producers through each engine's own
//! client, `work` draining queues, and several worker processes surviving a SIGKILL.

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Engine, TestDb};

fn plain_sql_producer_is_worked(engine: Engine) {
    let db = TestDb::new(engine);
    // The documented plain INSERT: every other column takes its default.
    db.sql(
        r#"INSERT INTO backlog_job (queue, payload) VALUES ('emails', '{"to": "a@example.com"}')"#,
    );
    db.sql(r#"INSERT INTO backlog_job (queue, payload, priority, kind) VALUES ('emails', '{"to": "b@example.com"}', -5, 'welcome')"#);
    let stats = db.stats();
    assert_eq!(stats["emails"]["available"], 2, "{stats}");
    let out = db.path("out.txt");
    let script = format!(
        "cat >> {}; echo \" $BACKLOG_QUEUE $BACKLOG_ATTEMPT\" >> {}",
        out.display(),
        out.display()
    );
    db.ok(&["work", "emails", "--drain", "--", "sh", "-c", &script]);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Priority -5 runs first.
    assert!(
        lines[0].contains("b@example.com") && lines[0].ends_with("emails 1"),
        "{text}"
    );
    assert!(lines[1].contains("a@example.com"), "{text}");
    let stats = db.stats();
    assert_eq!(stats["emails"]["completed"], 2, "{stats}");
    assert_eq!(stats["emails"]["available"], 0);

    // A failing command: retried with backoff, then dead with its stderr in the history.
    db.ok(&[
        "queue",
        "set",
        "flaky",
        "--max-attempts",
        "2",
        "--backoff-base",
        "10ms",
        "--backoff-max",
        "20ms",
    ]);
    let id = db.ok(&["enqueue", "flaky", r#"{"n":1}"#]).trim().to_owned();
    db.ok(&[
        "work",
        "flaky",
        "--drain",
        "--",
        "sh",
        "-c",
        "echo broken >&2; exit 3",
    ]);
    let job: serde_json::Value =
        serde_json::from_str(&db.ok(&["job", "show", &id, "--json"])).unwrap();
    assert_eq!(job["state"], "dead", "{job}");
    assert_eq!(job["errors"].as_array().unwrap().len(), 2);
    assert!(
        job["errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("exit status: 3: broken"),
        "{job}"
    );
    let text = db.ok(&["job", "show", &id]);
    assert!(
        text.contains("attempt 1 at ") && text.contains("exit status: 3: broken"),
        "the error history is not shown:\n{text}"
    );
    let dead = db.ok(&["dead", "list", "flaky"]);
    assert!(dead.contains(&id), "{dead}");
    assert_eq!(db.ok(&["dead", "redrive", "flaky"]).trim(), "1");
    db.ok(&["work", "flaky", "--drain", "--", "true"]);
    assert_eq!(db.stats()["flaky"]["completed"], 1);

    // A command reports progress and a result on stdout; `job show` shows them.
    let id = db.ok(&["enqueue", "reports", "{}"]).trim().to_owned();
    let out = db.ok(&[
        "work",
        "reports",
        "--drain",
        "--",
        "sh",
        "-c",
        r#"echo hello; echo 'backlog:progress {"done": 50}'; echo 'backlog:result {"rows": 3}'"#,
    ]);
    assert!(out.contains("hello") && !out.contains("backlog:"), "{out}");
    let text = db.ok(&["job", "show", &id]);
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .replace(' ', "")
    };
    assert_eq!(field("progress"), r#"progress{"done":50}"#);
    assert_eq!(field("result"), r#"result{"rows":3}"#);
    assert_eq!(field("state"), "statecompleted");

    // A timeout kills the command and fails the job.
    db.ok(&["queue", "set", "slow", "--max-attempts", "1"]);
    let id = db.ok(&["enqueue", "slow", "{}"]).trim().to_owned();
    db.ok(&[
        "work",
        "slow",
        "--drain",
        "--timeout",
        "200ms",
        "--",
        "sleep",
        "10",
    ]);
    let job: serde_json::Value =
        serde_json::from_str(&db.ok(&["job", "show", &id, "--json"])).unwrap();
    assert!(
        job["errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 200ms"),
        "{job}"
    );

    // Pause, resume, and the queue's settings.
    db.ok(&["queue", "pause", "emails"]);
    db.sql(r#"INSERT INTO backlog_job (queue, payload) VALUES ('emails', '{}')"#);
    let shown: serde_json::Value =
        serde_json::from_str(&db.ok(&["queue", "show", "emails", "--json"])).unwrap();
    assert_eq!(shown["paused"], true);
    let w = db
        .cmd(&["work", "emails", "--", "true"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        db.stats()["emails"]["available"],
        1,
        "a paused queue handed out a job"
    );
    terminate(w);
    db.ok(&["queue", "resume", "emails"]);
    db.ok(&["work", "emails", "--drain", "--", "true"]);
    assert_eq!(db.stats()["emails"]["completed"], 3);
}

fn terminate(mut child: std::process::Child) -> std::process::ExitStatus {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    child.wait().unwrap()
}

#[test]
fn sqlite_plain_sql_producer() {
    plain_sql_producer_is_worked(Engine::Sqlite);
}

#[test]
fn postgres_plain_sql_producer() {
    plain_sql_producer_is_worked(Engine::Postgres);
}

#[test]
fn mysql_plain_sql_producer() {
    plain_sql_producer_is_worked(Engine::MySql);
}

/// Several `backlog work` processes drain 2,000 jobs; one is killed with SIGKILL mid-run and
/// another started. Every job ends completed, and only jobs in flight at the kill ran twice.
fn workers_survive_sigkill(engine: Engine) {
    let db = TestDb::new(engine);
    let n = 2000;
    let lines: String = (0..n).map(|i| format!("{{\"i\":{i}}}\n")).collect();
    std::fs::write(db.path("jobs.jsonl"), lines).unwrap();
    assert_eq!(
        db.ok(&["enqueue", "work", "--jsonl", "jobs.jsonl"]).trim(),
        n.to_string()
    );
    let log = db.path("runs.log");
    let script = format!("echo $BACKLOG_JOB_ID >> {}; sleep 0.01", log.display());
    let concurrency = 4;
    let spawn = || {
        db.cmd(&[
            "work",
            "work",
            "--drain",
            "--concurrency",
            &concurrency.to_string(),
            "--lease",
            "2s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
    };
    let mut workers = vec![spawn(), spawn(), spawn()];
    let count = || {
        std::fs::read_to_string(&log)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let start = Instant::now();
    while count() < n / 4 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "workers made no progress"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut victim = workers.remove(0);
    victim.kill().unwrap(); // SIGKILL
    victim.wait().unwrap();
    workers.push(spawn());
    for mut w in workers {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = w.try_wait().unwrap() {
                assert!(status.success(), "a worker failed: {status}");
                break;
            }
            assert!(Instant::now() < deadline, "a worker did not drain");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let stats = db.stats();
    assert_eq!(stats["work"]["completed"], n, "{stats}");
    let mut runs: HashMap<String, usize> = HashMap::new();
    for id in std::fs::read_to_string(&log).unwrap().lines() {
        *runs.entry(id.to_owned()).or_default() += 1;
    }
    assert_eq!(runs.len(), n, "some jobs never ran");
    let twice = runs.values().filter(|&&c| c > 1).count();
    assert!(
        twice <= concurrency,
        "{twice} jobs ran twice; at most {concurrency} were in flight at the kill"
    );
    assert!(runs.values().all(|&c| c <= 2));
}

#[test]
fn postgres_workers_survive_sigkill() {
    workers_survive_sigkill(Engine::Postgres);
}

#[test]
fn mysql_workers_survive_sigkill() {
    workers_survive_sigkill(Engine::MySql);
}

#[test]
fn sqlite_workers_survive_sigkill() {
    workers_survive_sigkill(Engine::Sqlite);
}

#[test]
fn demo_runs_on_the_sqlite_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::BIN)
        .args(["demo", "--jobs", "30"])
        .env_remove("BACKLOG_DATABASE_URL")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        dir.path().join("backlog.db").exists(),
        "the default database is sqlite://backlog.db"
    );
    assert!(
        text.contains(
            "demo                              0          0        0        0         29        1"
        ),
        "{text}"
    );
}

/// Waits for a process to exit by itself; kills it and fails the test after `limit`.
fn exits_within(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `work --kind a --drain` exits once no job of kind a is left, although jobs of other kinds
/// (and one without a kind) still wait in the queue for a worker that takes them.
fn drain_of_some_kinds(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&["enqueue", "mixed", r#"{"n":1}"#, "--kind", "a"]);
    db.ok(&["enqueue", "mixed", r#"{"n":2}"#, "--kind", "b"]);
    db.ok(&["enqueue", "mixed", r#"{"n":3}"#]);
    db.ok(&[
        "enqueue",
        "mixed",
        r#"{"n":4}"#,
        "--kind",
        "a",
        "--delay",
        "1s",
    ]);
    let out = db.path("ran.txt");
    let script = format!("cat >> {}; echo >> {}", out.display(), out.display());
    let worker = db
        .cmd(&[
            "work", "mixed", "--kind", "a", "--drain", "--poll", "50ms", "--", "sh", "-c", &script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = exits_within(worker, Duration::from_secs(30));
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    // Both jobs of kind a ran (the delayed one too: a drain waits for scheduled jobs), no other.
    let mut ran: Vec<i64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["n"]
                .as_i64()
                .unwrap()
        })
        .collect();
    ran.sort_unstable();
    assert_eq!(ran, [1, 4]);
    let stats = db.stats();
    assert_eq!(stats["mixed"]["completed"], 2, "{stats}");
    assert_eq!(stats["mixed"]["available"], 2, "{stats}");

    // A worker of every kind takes the rest.
    let worker = db
        .cmd(&["work", "mixed", "--drain", "--poll", "50ms", "--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        exits_within(worker, Duration::from_secs(30))
            .status
            .success()
    );
    assert_eq!(db.stats()["mixed"]["completed"], 4);
}

#[test]
fn sqlite_drain_of_some_kinds() {
    drain_of_some_kinds(Engine::Sqlite);
}

#[test]
fn postgres_drain_of_some_kinds() {
    drain_of_some_kinds(Engine::Postgres);
}

#[test]
fn mysql_drain_of_some_kinds() {
    drain_of_some_kinds(Engine::MySql);
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM: stop claiming, let running jobs finish within the grace period, release the rest.
fn graceful_shutdown(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&["enqueue", "g", "1"]);
    db.ok(&["enqueue", "g", "2"]);
    db.ok(&["enqueue", "g", "3"]);
    let w = db
        .cmd(&[
            "work",
            "g",
            "--concurrency",
            "2",
            "--grace",
            "10s",
            "--",
            "sh",
            "-c",
            "sleep 1",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("two running jobs", || db.stats()["g"]["running"] == 2);
    let status = terminate(w);
    assert!(status.success(), "{status}");
    let stats = db.stats();
    assert_eq!(
        (
            stats["g"]["completed"].as_i64(),
            stats["g"]["available"].as_i64()
        ),
        (Some(2), Some(1)),
        "{stats}"
    );

    // Jobs that outlast the grace period are stopped and released at once, attempt not counted.
    let w = db
        .cmd(&["work", "g", "--grace", "300ms", "--", "sleep", "30"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("a running job", || db.stats()["g"]["running"] == 1);
    let started = Instant::now();
    assert!(terminate(w).success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the grace period was not honoured"
    );
    let list: serde_json::Value =
        serde_json::from_str(&db.ok(&["job", "list", "g", "--state", "available", "--json"]))
            .unwrap();
    assert_eq!(list[0]["attempt"], 0, "{list}");
    assert_eq!(list[0]["lease_token"], serde_json::Value::Null);
}

#[test]
fn sqlite_graceful_shutdown() {
    graceful_shutdown(Engine::Sqlite);
}

#[test]
fn postgres_graceful_shutdown() {
    graceful_shutdown(Engine::Postgres);
}

#[test]
fn mysql_graceful_shutdown() {
    graceful_shutdown(Engine::MySql);
}

/// The few-second benchmark runs on every backend (no thresholds: it keeps `bench` working) and
/// leaves no job behind.
fn bench_quick(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&["migrate"]);
    let out = db.ok(&[
        "bench",
        "--quick",
        "--json",
        "--jobs",
        "2000",
        "--steady",
        "500ms",
        "--latency-jobs",
        "50",
    ]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in [
        "enqueue_single_per_s",
        "enqueue_single_baseline_per_s",
        "enqueue_batch_per_s",
        "enqueue_batch_baseline_per_s",
        "e2e_jobs_per_s",
        "baseline_jobs_per_s",
        "e2e_steady_jobs_per_s",
        "latency_p50_ms",
        "latency_p99_ms",
        "s2_mean_ms",
        "s2_p99_ms",
    ] {
        assert!(r[key].as_f64().unwrap() > 0.0, "{key} in {r}");
    }
    assert_eq!(r["params"]["batch_jobs"], 2000);
    // Each S2 job sleeps 100 ms: claim to completion cannot be shorter.
    assert!(r["s2_mean_ms"].as_f64().unwrap() >= 100.0, "{r}");
    assert!(r["s2_p99_ms"].as_f64().unwrap() >= r["s2_mean_ms"].as_f64().unwrap() * 0.9);

    // One phase alone: its figures, and null for the phases left out.
    let out = db.ok(&[
        "bench", "--quick", "--json", "--only", "drain", "--jobs", "1000",
    ]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in [
        "e2e_jobs_per_s",
        "baseline_jobs_per_s",
        "baseline_two_statements_jobs_per_s",
        "e2e_ratio",
        "e2e_two_statements_ratio",
    ] {
        assert!(r[key].as_f64().unwrap() > 0.0, "{key} in {r}");
    }
    for key in [
        "enqueue_single_per_s",
        "enqueue_batch_per_s",
        "latency_p50_ms",
        "s2_mean_ms",
    ] {
        assert!(r[key].is_null(), "{key} in {r}");
    }
    assert_eq!(r["params"]["phases"], serde_json::json!(["drain"]));
    // The baseline is the fastest of the loop counts tried, one a round.
    let tried = r["params"]["fold_loops"].as_array().unwrap().clone();
    let best = r["baseline_loops"].as_array().unwrap();
    assert_eq!(
        best.len() as u64,
        r["params"]["rounds"].as_u64().unwrap(),
        "{r}"
    );
    assert!(best.iter().all(|n| tried.contains(n)), "{r}");
    // And of the forms the database has: a batch deleted by the statement that claims the next,
    // or (where a claim can hold row locks) locked and deleted in one transaction.
    let forms = r["baseline_forms"].as_array().unwrap();
    assert_eq!(forms.len(), best.len(), "{r}");
    let known: &[&str] = match engine {
        Engine::Sqlite => &["statement"],
        _ => &["statement", "transaction"],
    };
    assert!(
        forms.iter().all(|f| known.contains(&f.as_str().unwrap())),
        "{r}"
    );
    let want = match engine {
        Engine::Sqlite => serde_json::json!([1]),
        _ => serde_json::json!([2]), // at concurrency 100, 4 loops would claim 25 each
    };
    assert_eq!(r["params"]["fold_loops"], want, "{r}");
    // The log the server wrote per job, beside each drain; SQLite has none to read.
    for key in ["e2e_log_bytes_per_job", "baseline_log_bytes_per_job"] {
        match engine {
            Engine::Sqlite => assert!(r[key].is_null(), "{key} in {r}"),
            _ => assert!(r[key].as_f64().unwrap() > 0.0, "{key} in {r}"),
        }
    }

    // The realistic drain in miniature: two worker processes, padded payloads, handlers that
    // await; every job completed once.
    let out = db.ok(&[
        "bench",
        "--json",
        "--processes",
        "2",
        "--jobs",
        "300",
        "--payload-bytes",
        "1024",
        "--handler-ms",
        "1",
    ]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let run = &r["runs"][0];
    assert_eq!(run["processes"], 2, "{r}");
    assert_eq!(run["handler_runs"], 300, "{r}");
    assert_eq!(run["completed"], 300, "{r}");
    assert_eq!(r["params"]["payload_bytes"], 1024, "{r}");
    match engine {
        Engine::Sqlite => assert!(run["log_bytes_per_job"].is_null(), "{r}"),
        _ => assert!(run["log_bytes_per_job"].as_f64().unwrap() > 0.0, "{r}"),
    }
    db.fails(
        &["bench", "--quick", "--only", "drain,warp"],
        "invalid value 'warp'",
    );

    // Cost as work grows, in miniature: every depth drained, the table measured.
    let out = db.ok(&[
        "bench",
        "--quick",
        "--json",
        "--grow",
        "--grow-levels",
        "500,3000",
        "--grow-drain",
        "400",
        "--grow-run",
        "1s",
        "--grow-rate",
        "500",
    ]);
    let g: serde_json::Value = serde_json::from_str(&out).unwrap();
    let levels = g["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{g}");
    assert_eq!(levels[1]["queued"], 3000);
    for l in levels {
        assert!(l["jobs_per_s"].as_f64().unwrap() > 0.0, "{g}");
        assert!(l["sizes"]["rows"].as_i64().unwrap() >= l["queued"].as_i64().unwrap());
        assert!(l["sizes"]["table_bytes"].as_i64().unwrap() > 0, "{g}");
        assert!(l["sizes"]["index_bytes"].as_i64().unwrap() > 0, "{g}");
    }
    assert!(g["deepest_to_shallowest_ratio"].as_f64().unwrap() > 0.0);
    assert!(g["long_run"]["jobs"].as_u64().unwrap() > 0, "{g}");
    let stats = db.stats();
    assert!(
        stats
            .as_object()
            .unwrap()
            .keys()
            .all(|q| !q.starts_with("bench_")),
        "{stats}"
    );
}

#[test]
fn sqlite_bench_quick() {
    bench_quick(Engine::Sqlite);
}

#[test]
fn postgres_bench_quick() {
    bench_quick(Engine::Postgres);
}

#[test]
fn mysql_bench_quick() {
    bench_quick(Engine::MySql);
}
