//! The clients' example workers (`examples/python/worker.py`, `clients/typescript/examples/
//! worker.mjs`, `clients/ruby/examples/worker.rb`) started as the contract tests start them: each
//! works one queue with `--drain` and logs `run I ID ATTEMPT` and its outcomes to
//! `<owner>.log` in the test's directory, under the lease owner `owner`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::TestDb;
use super::client_contract::{Proc, stdout_within};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Python with the package importable from its source tree: `BACKLOG_TEST_PYTHON`, else
/// Debian's `/usr/bin/python3` (the one Debian's python3-psycopg and python3-pymysql serve),
/// else `python3`.
pub fn python() -> Command {
    let bin = std::env::var("BACKLOG_TEST_PYTHON").unwrap_or_else(|_| {
        if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3".into()
        } else {
            "python3".into()
        }
    });
    let mut cmd = Command::new(bin);
    cmd.env("PYTHONPATH", Path::new(ROOT).join("clients/python/src"));
    cmd
}

/// Node in the TypeScript package's folder (`BACKLOG_TEST_NODE`, else `node`), the package
/// compiled once per test run (`tsc -p clients/typescript`); fails when Node or the npm
/// dependencies are missing.
pub fn node() -> Command {
    static BUILT: OnceLock<()> = OnceLock::new();
    let dir = Path::new(ROOT).join("clients/typescript");
    let bare = || {
        let mut cmd =
            Command::new(std::env::var("BACKLOG_TEST_NODE").unwrap_or_else(|_| "node".into()));
        cmd.current_dir(&dir);
        cmd
    };
    BUILT.get_or_init(|| {
        for dep in ["typescript", "pg", "mysql2", "better-sqlite3"] {
            assert!(
                dir.join("node_modules").join(dep).exists(),
                "{dep} is not installed in clients/typescript: run `npm ci` there (scripts/services.sh does)"
            );
        }
        let mut cmd = bare();
        cmd.args(["node_modules/typescript/bin/tsc", "-p", "."]);
        stdout_within(cmd, Duration::from_secs(120));
    });
    bare()
}

/// Ruby with the gem's `lib` on the load path: `BACKLOG_TEST_RUBY`, else Debian's
/// `/usr/bin/ruby` (the one ruby-pg and friends serve), else `ruby`.
pub fn ruby() -> Command {
    let bin = std::env::var("BACKLOG_TEST_RUBY").unwrap_or_else(|_| {
        if Path::new("/usr/bin/ruby").exists() {
            "/usr/bin/ruby".into()
        } else {
            "ruby".into()
        }
    });
    let mut cmd = Command::new(bin);
    cmd.arg("-I").arg(Path::new(ROOT).join("clients/ruby/lib"));
    cmd
}

fn example(
    cmd: Command,
    script: PathBuf,
    db: &TestDb,
    queue: &str,
    owner: &str,
    extra: &[&str],
) -> Proc {
    let mut cmd = cmd;
    cmd.arg(script)
        .args([&db.url, queue, "--owner", owner, "--drain", "--log"])
        .arg(db.path(&format!("{owner}.log")))
        .args(extra);
    Proc::spawn(db, owner, cmd)
}

/// The Python client's example worker.
pub fn python_worker(db: &TestDb, queue: &str, owner: &str, extra: &[&str]) -> Proc {
    let script = Path::new(ROOT).join("examples/python/worker.py");
    example(python(), script, db, queue, owner, extra)
}

/// The TypeScript client's example worker.
pub fn ts_worker(db: &TestDb, queue: &str, owner: &str, extra: &[&str]) -> Proc {
    let script = PathBuf::from("examples/worker.mjs");
    example(node(), script, db, queue, owner, extra)
}

/// The Ruby client's example worker.
pub fn rb_worker(db: &TestDb, queue: &str, owner: &str, extra: &[&str]) -> Proc {
    let script = Path::new(ROOT).join("clients/ruby/examples/worker.rb");
    example(ruby(), script, db, queue, owner, extra)
}
