//! What the contract tests of the clients (`python_contract.rs`, `typescript_contract.rs`)
//! share: processes run to their end or killed with the test, `backlog work` logging each job
//! it runs as the clients' example workers do, the logs and rows read back, and `backlog serve`
//! with a token.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Engine, TestDb};

/// Runs `cmd` to its end within `limit` (killed and failed past it); expects success and
/// returns its stdout.
pub fn stdout_within(mut cmd: Command, limit: Duration) -> String {
    let what = format!("{cmd:?}");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let Ok(out) = rx.recv_timeout(limit) else {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        panic!("{what} took longer than {limit:?}");
    };
    let out = out.unwrap();
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
/// One process of the run, with its output in files of the test's directory.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub err: PathBuf,
}

impl Proc {
    pub fn spawn(db: &TestDb, name: &str, mut cmd: Command) -> Proc {
        let err = db.path(&format!("{name}.err"));
        cmd.stdin(Stdio::null())
            .stdout(File::create(db.path(&format!("{name}.out"))).unwrap())
            .stderr(File::create(&err).unwrap());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc {
            name: name.into(),
            child,
            err,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits for a successful exit before `deadline`; kills it and fails otherwise.
    pub fn finish(mut self, deadline: Instant) {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "{} failed ({status}): {}",
                    self.name,
                    self.stderr()
                );
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("{} did not drain in time: {}", self.name, self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A failed assertion must not leave workers behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
/// `backlog work --drain` running a shell command per job that logs `run I ID ATTEMPT` as the
/// clients' example workers do, and fails the first attempt of a payload with `fail_once`.
pub fn backlog_worker(db: &TestDb, queue: &str, name: &str) -> Proc {
    let log = db.path(&format!("{name}.log"));
    let script = format!(
        r#"IFS= read -r p || true
i=$(printf '%s' "$p" | tr -cd 0-9)
echo "run $i $BACKLOG_JOB_ID $BACKLOG_ATTEMPT" >> {log}
case $p in *fail_once*) if [ "$BACKLOG_ATTEMPT" = 1 ]; then echo 'fails once on purpose' >&2; exit 1; fi;; esac
exit 0"#,
        log = log.display()
    );
    let mut cmd = db.cmd(&["work", queue, "--drain", "--concurrency", "4", "--"]);
    cmd.args(["sh", "-c", &script]);
    Proc::spawn(db, name, cmd)
}
/// A line of a worker's log: `run I ID ATTEMPT` or `OUTCOME I ID`.
pub struct Event {
    pub what: String,
    pub i: i64,
    pub id: i64,
    pub attempt: Option<i64>,
}

pub fn events(db: &TestDb, name: &str) -> Vec<Event> {
    let text = std::fs::read_to_string(db.path(&format!("{name}.log"))).unwrap_or_default();
    text.lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let num = |k: usize| -> i64 {
                f.get(k)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("{name}.log: bad line {line:?}"))
            };
            Event {
                what: f[0].to_owned(),
                i: num(1),
                id: num(2),
                attempt: (f[0] == "run").then(|| num(3)),
            }
        })
        .collect()
}
/// A job row as the test reads it back.
pub struct Row {
    pub state: String,
    pub attempt: i64,
    pub owner: String,
    pub i: i64,
    pub fail_once: bool,
}

pub fn rows(db: &TestDb, queue: &str) -> BTreeMap<i64, Row> {
    let sep = if db.engine == Engine::MySql {
        '\t'
    } else {
        '|'
    };
    db.sql(&format!(
        "SELECT id, state, attempt, lease_owner, payload FROM backlog_job_all WHERE queue = '{queue}'"
    ))
    .lines()
    .map(|line| {
        let f: Vec<&str> = line.splitn(5, sep).collect();
        let payload: Value = serde_json::from_str(f[4]).unwrap();
        let row = Row {
            state: f[1].into(),
            attempt: f[2].parse().unwrap(),
            owner: f[3].into(),
            i: payload["i"].as_i64().unwrap(),
            fail_once: payload["fail_once"] == true,
        };
        (f[0].parse().unwrap(), row)
    })
    .collect()
}
pub fn write_jsonl(path: &Path, range: std::ops::Range<i64>) {
    let lines: String = range
        .map(|i| {
            let p = if i % 10 == 3 {
                json!({"i": i, "fail_once": true})
            } else {
                json!({"i": i})
            };
            format!("{p}\n")
        })
        .collect();
    std::fs::write(path, lines).unwrap();
}
pub fn job_show(db: &TestDb, id: &Value) -> Value {
    let out = db.ok(&["job", "show", &id.to_string(), "--json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}
/// The job both producers (SQL and HTTP) enqueue with every option, read back as given: a
/// second enqueue under its taken unique key answered with the same job. Returns the job.
pub fn every_option_kept(db: &TestDb, out: &Value, tp: &str) -> Value {
    assert_eq!(
        out["first"], out["again"],
        "a taken unique key made a job: {out}"
    );
    let job = job_show(db, &out["first"]);
    assert_eq!(job["queue"], "mail");
    assert_eq!(job["kind"], "welcome");
    assert_eq!(job["payload"], json!({"to": "a@example.com", "n": 1}));
    assert_eq!(job["priority"], -7);
    assert_eq!(job["max_attempts"], 4);
    assert_eq!(job["unique_key"], "welcome:42");
    assert_eq!(job["group"], "acct-42");
    assert_eq!(job["state"], "waiting", "a grouped job waits for its turn");
    assert_eq!(job["traceparent"], tp);
    assert_eq!(job["tracestate"], "vendor=x");
    job
}
pub fn count(db: &TestDb, sql: &str) -> i64 {
    db.sql(sql).trim().parse().unwrap()
}
/// A `backlog serve` process on a free port of 127.0.0.1, killed when dropped.
pub struct Server {
    pub child: Child,
    pub base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `backlog serve` on the test's database with a tokens file made by `backlog token new`: one
/// `produce` token, whose secret is returned with the server.
pub fn serve_with_token(db: &TestDb) -> (Server, String) {
    let out = db.ok(&["token", "new", "py-worker", "--scope", "produce"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 2, "{out}");
    let tokens = db.path("tokens");
    std::fs::write(&tokens, format!("{}\n", lines[0])).unwrap();
    let secret = lines[1].trim().to_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let child = db
        .cmd(&["serve", "--listen", &listen])
        .arg("--tokens")
        .arg(&tokens)
        .stdout(Stdio::null())
        .stderr(File::create(db.path("serve.err")).unwrap())
        .spawn()
        .expect("serve starts");
    let server = Server {
        child,
        base: format!("http://{listen}"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if ureq::get(&format!("{}/readyz", server.base)).call().is_ok() {
            return (server, secret);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "serve did not become ready on {listen}: {}",
        std::fs::read_to_string(db.path("serve.err")).unwrap_or_default()
    );
}
/// One test per backend of each case: `python_producer::sqlite`, `…::postgres`, `…::mysql`.
// Used by the contract tests only; the other test binaries compile this module too.
#[allow(unused_macros)]
macro_rules! on_every_backend {
    ($($module:ident => $case:ident),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[test]
            fn sqlite() {
                $case(Engine::Sqlite);
            }

            #[cfg(feature = "servers")]
            #[test]
            fn postgres() {
                $case(Engine::Postgres);
            }

            #[cfg(feature = "servers")]
            #[test]
            fn mysql() {
                $case(Engine::MySql);
            }
        }
    )*};
}

#[allow(unused_imports)]
pub(crate) use on_every_backend;
