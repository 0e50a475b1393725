//! `backlog-bench` (which `backlog bench` runs) on every backend: a few-second run of each mode
//! keeps it working (no thresholds: these are not measurements) and leaves no job behind; bad
//! arguments are refused before the database is touched.

use std::process::Output;

use backlog_testdb::{ENGINES, Engine, TestDb};

const BIN: &str = env!("CARGO_BIN_EXE_backlog-bench");

/// `out` is a refusal of `args` that says `needle`.
fn assert_refused(out: &Output, args: &[&str], needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
}

/// A test database and the benchmark run on it.
struct Bench {
    db: TestDb,
}

impl Bench {
    async fn new(engine: Engine) -> Bench {
        Bench {
            db: TestDb::new(engine).await,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        std::process::Command::new(BIN)
            .args(["--database-url", &self.db.url])
            .args(args)
            .output()
            .expect("backlog-bench runs")
    }

    /// Runs the benchmark with `args`; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs the benchmark with `args`, which it refuses with `needle` in its message.
    fn fails(&self, args: &[&str], needle: &str) {
        assert_refused(&self.run(args), args, needle);
    }

    /// The benchmark's queues and tables are gone: no job and no queue left.
    async fn assert_nothing_left(&self) {
        let jobs = self.db.scalar("SELECT COUNT(*) FROM backlog_job_all").await;
        let queues = self
            .db
            .scalar("SELECT COUNT(*) FROM backlog_queue WHERE name LIKE 'bench%'")
            .await;
        assert_eq!((jobs, queues), (0, 0), "jobs, queues left behind");
    }
}

/// The few-second benchmark runs on every backend (no thresholds: it keeps `bench` working) and
/// leaves no job behind.
async fn quick_runs(engine: Engine) {
    let db = Bench::new(engine).await;
    let out = db.ok(&[
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
    let out = db.ok(&["--quick", "--json", "--only", "drain", "--jobs", "1000"]);
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
    db.fails(&["--quick", "--only", "drain,warp"], "invalid value 'warp'");

    // Cost as work grows, in miniature: every depth drained, the table measured.
    let out = db.ok(&[
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

    // The soak in miniature, with a session holding a snapshot (and, on a server, one idle in
    // transaction after a write): jobs completed under it, the held session named.
    let mut kinds = vec!["snapshot"];
    if engine != Engine::Sqlite {
        kinds.push("write");
    }
    for kind in kinds {
        let out = db.ok(&[
            "--quick",
            "--json",
            "--soak",
            "3s",
            "--soak-rate",
            "200",
            "--hold-transaction",
            "--hold-kind",
            kind,
        ]);
        let s: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(s["params"]["hold_kind"], kind, "{s}");
        let enqueued = s["jobs_enqueued"].as_u64().unwrap();
        let completed = s["jobs_completed"].as_u64().unwrap();
        assert!(completed > 0 && completed <= enqueued, "{s}");
    }
    db.assert_nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_quick_runs() {
    quick_runs(Engine::Sqlite).await;
}

#[cfg(feature = "servers")]
#[tokio::test(flavor = "multi_thread")]
async fn postgres_quick_runs() {
    quick_runs(Engine::Postgres).await;
}

#[cfg(feature = "servers")]
#[tokio::test(flavor = "multi_thread")]
async fn mysql_quick_runs() {
    quick_runs(Engine::MySql).await;
}

/// `--flow` runs on every backend: both drains complete every job, and the global limit's
/// samples never pass it.
#[tokio::test(flavor = "multi_thread")]
async fn flow_runs() {
    for &engine in ENGINES {
        let db = Bench::new(engine).await;
        let out = db.ok(&[
            "--flow",
            "--json",
            "--rounds",
            "1",
            "--jobs",
            "300",
            "--flow-groups",
            "30",
            "--flow-limit",
            "5",
            "--flow-limit-jobs",
            "40",
            "--s2-sleep",
            "50ms",
            "--s2-concurrency",
            "20",
        ]);
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(r["grouped_per_s"].as_f64().unwrap() > 0.0, "{r}");
        let most = r["limit_most_running"].as_i64().unwrap();
        assert!((1..=5).contains(&most), "{r}");
    }
}

/// Bad arguments get clap's message and a non-zero exit, and touch no database: the URL names a
/// SQLite file that is never created.
#[test]
fn bad_arguments_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("never.db");
    let url = format!("sqlite://{}", file.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--producers", "0"], "0 is not in 1..=256"),
        (vec!["--batch", "100000"], "100000 is not in 1..=10000"),
        (vec!["--steady", "soon"], "invalid value 'soon'"),
        (vec!["--jobs", "-1"], "unexpected argument '-1'"),
        (vec!["--s2-concurrency", "0"], "0 is not in 1..=10000"),
        (vec!["--s2-sleep", "long"], "invalid value 'long'"),
        (vec!["--processes", "4,0"], "0 is not in 1..=512"),
        (vec!["--processes", "4", "--flow"], "cannot be used with"),
        (vec!["--process-connections", "0"], "0 is not in 1..=1000"),
        (
            vec!["--payload-bytes", "1024"],
            "required arguments were not provided",
        ),
        (
            vec!["--processes", "2", "--handler-ms", "60001"],
            "60001 is not in 0..=60000",
        ),
        (vec!["--grow-levels", "10,x"], "invalid value 'x'"),
        (vec!["--grow-levels", "0"], "0 is not in 1..=100000000"),
        (vec!["--grow-rate", "0"], "0 is not in 1..=1000000"),
        (vec!["--soak", "0s"], "must be longer than zero"),
        (vec!["--soak", "1m", "--grow"], "cannot be used with"),
        (
            vec!["--soak", "1m", "--overload", "5"],
            "cannot be used with",
        ),
        (vec!["--hold-transaction"], "--soak <SOAK>"),
        (
            vec!["--soak", "1m", "--hold-kind", "write"],
            "--hold-transaction",
        ),
        (
            vec!["--soak", "1m", "--hold-url", "postgres://x/y"],
            "--hold-transaction",
        ),
        (
            vec![
                "--soak",
                "1m",
                "--hold-transaction",
                "--hold-kind",
                "forever",
            ],
            "invalid value 'forever'",
        ),
        (
            vec!["--soak", "1m", "--hold-transaction", "--hold-kind", "write"],
            "SQLite has one writer at a time",
        ),
        (
            vec![
                "--soak",
                "1m",
                "--hold-transaction",
                "--hold-url",
                "postgres://x/y",
            ],
            "SQLite has no other server",
        ),
        (
            vec![
                "--database-url",
                "postgres://127.0.0.1:1/never",
                "--soak",
                "1m",
                "--hold-transaction",
                "--hold-url",
                "mysql://x/y",
            ],
            "expected a postgres:// URL",
        ),
        (
            vec!["--soak", "1m", "--soak-window", "0s"],
            "must be longer than zero",
        ),
        (vec!["--overload", "0"], "0 is not in 1..=100000000"),
        (vec!["--overload-producers", "0"], "0 is not in 1..=4096"),
        (vec!["process"], "required"),
        (
            vec!["--database-url", "oracle://x", "--quick"],
            "expected sqlite://PATH",
        ),
    ];
    for (args, needle) in &cases {
        let out = std::process::Command::new(BIN)
            .env("BACKLOG_DATABASE_URL", &url)
            .args(args)
            .output()
            .unwrap();
        assert_refused(&out, args, needle);
    }
    assert!(!file.exists(), "a refused run created {}", file.display());
}
