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

#[cfg(feature = "servers")]
#[test]
fn postgres_plain_sql_producer() {
    plain_sql_producer_is_worked(Engine::Postgres);
}

#[cfg(feature = "servers")]
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

#[cfg(feature = "servers")]
#[test]
fn postgres_workers_survive_sigkill() {
    workers_survive_sigkill(Engine::Postgres);
}

#[cfg(feature = "servers")]
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
            "demo                              0          0         0        0        0         29        1"
        ),
        "{text}"
    );
    // Again in the same directory: the dead job shown is this run's, not the first run's.
    let out = std::process::Command::new(common::BIN)
        .args(["demo", "--jobs", "30"])
        .env_remove("BACKLOG_DATABASE_URL")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let after = |marker: &str| -> i64 {
        let rest = &text[text
            .find(marker)
            .unwrap_or_else(|| panic!("{marker}: {text}"))
            + marker.len()..];
        rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap()]
            .parse()
            .unwrap()
    };
    let (first, shown) = (after("(ids "), after("backlog job show "));
    assert!(first > 30 && shown >= first, "{text}");
    // The demo's settings went through the library, which audits them (once: the second run
    // changed nothing).
    let out = std::process::Command::new(common::BIN)
        .args(["audit", "--json"])
        .env_remove("BACKLOG_DATABASE_URL")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = log.as_array().unwrap_or_else(|| panic!("{log}"));
    assert_eq!(entries.len(), 1, "{log}");
    assert_eq!(entries[0]["action"], "queue.settings");
    assert!(
        entries[0]["actor"]
            .as_str()
            .unwrap()
            .starts_with("library:"),
        "{log}"
    );
    assert_eq!(
        entries[0]["detail"]["changed"]["max_attempts"],
        serde_json::json!({"before": 25, "after": 3})
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

#[cfg(feature = "servers")]
#[test]
fn postgres_drain_of_some_kinds() {
    drain_of_some_kinds(Engine::Postgres);
}

#[cfg(feature = "servers")]
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
    // The running worker is registered with its queue (its jobs in flight are counted at each
    // 5 s beat), and deletes its registration when it stops.
    let pid = i64::from(w.id());
    let workers =
        || -> serde_json::Value { serde_json::from_str(&db.ok(&["workers", "--json"])).unwrap() };
    wait_for("the worker's registration", || {
        workers()
            .as_array()
            .is_some_and(|l| l.iter().any(|w| w["pid"] == pid))
    });
    let listed = workers();
    assert_eq!(
        listed[0]["queues"],
        serde_json::json!([{"queue": "g", "concurrency": 2}])
    );
    assert_eq!(listed[0]["expired"], false);
    assert!(db.ok(&["workers"]).contains("g×2"));
    let status = terminate(w);
    assert!(status.success(), "{status}");
    assert_eq!(
        workers(),
        serde_json::json!([]),
        "a worker that stops is gone"
    );
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

#[cfg(feature = "servers")]
#[test]
fn postgres_graceful_shutdown() {
    graceful_shutdown(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_graceful_shutdown() {
    graceful_shutdown(Engine::MySql);
}

/// A worker says on stderr why each attempt failed, and says at once, loudly, that a command
/// cannot be started at all (issue 46: it used to print nothing while every job failed).
#[test]
fn failed_attempts_are_said_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let backlog = |args: &[&str]| {
        std::process::Command::new(common::BIN)
            .args(args)
            .env("BACKLOG_DATABASE_URL", "sqlite://said.db")
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let out = backlog(&["enqueue", "said", "{}", "--max-attempts", "1"]);
        assert!(out.status.success(), "{out:?}");
    }
    let out = backlog(&["work", "said", "--drain", "--", "./no-such-script.sh"]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("error: cannot start the command \"./no-such-script.sh\"")
            .count(),
        1,
        "said once: {err}"
    );
    assert_eq!(
        err.matches("attempt 1 of 1 failed (no attempt left: dead): cannot run")
            .count(),
        2,
        "each attempt: {err}"
    );

    let out = backlog(&["enqueue", "said", "{}", "--max-attempts", "2"]);
    assert!(out.status.success(), "{out:?}");
    let script = "echo first line >&2; echo boom >&2; exit 3";
    let out = backlog(&["work", "said", "--drain", "--", "sh", "-c", script]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("attempt 1 of 2 failed (it will be retried): command exit status: 3: boom"),
        "{err}"
    );
    assert!(
        err.contains("attempt 2 of 2 failed (no attempt left: dead): command exit status: 3: boom"),
        "{err}"
    );
}
