//! `backlog bench` runs the `backlog-bench` binary (its own crate) with the arguments it was
//! given and the database URL, and ends as it ends; without that binary it says how to get it.
//! A stand-in script takes the benchmark's place, next to a copy of `backlog`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_backlog");

/// Held by each test for its whole run: a test writing its copy of `backlog` (or its script)
/// while the other forks a child leaves the child a descriptor open for writing, and running
/// that file then fails with "Text file busy" (ETXTBSY) until the child execs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A copy of `backlog` in `dir`, with an empty PATH so that only what `dir` holds is found.
fn backlog_in(dir: &Path) -> Command {
    let copy = dir.join("backlog");
    std::fs::copy(BIN, &copy).unwrap();
    let mut cmd = Command::new(copy);
    cmd.env("PATH", "").env_remove("BACKLOG_DATABASE_URL");
    cmd
}

#[test]
fn bench_runs_the_benchmark_binary_beside_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("backlog-bench");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"url=$BACKLOG_DATABASE_URL\"\nfor a in \"$@\"; do echo \"arg=$a\"; done\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = backlog_in(dir.path())
        .args(["--database-url", "postgres://u@db/x", "bench", "--quick"])
        .args(["--only", "drain", "--help"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "url=postgres://u@db/x\narg=--quick\narg=--only\narg=drain\narg=--help\n"
    );
    assert_eq!(out.status.code(), Some(3), "its exit code is the command's");
}

#[test]
fn without_the_benchmark_binary_bench_says_how_to_build_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let out = backlog_in(dir.path())
        .args(["--database-url", &format!("sqlite://{}", db.display())])
        .args(["bench", "--quick"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("runs the `backlog-bench` binary")
            && err.contains("cargo build --release -p backlog-bench"),
        "{err}"
    );
    assert!(!db.exists(), "the database was touched");
}
