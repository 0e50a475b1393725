//! The SQL contract (docs/sql.md) driven from another language: the Python package of
//! `clients/python` (run from its source tree) enqueues with the plain INSERT and consumes with
//! the documented claim, ack, nack, heartbeat and rescue statements, at the same time as `backlog
//! work` on the same queue, on SQLite, PostgreSQL and MariaDB; its producer writes on the
//! application's own connection inside the application's transaction, refuses bad input with
//! typed errors before writing anything, and its asyncio API works the same queue; over HTTP
//! (`backlog_client.http`), it enqueues and works a queue through `backlog serve` with a token.
//! Python and its drivers (python3-psycopg, python3-pymysql, which `scripts/services.sh`
//! installs) are required: a missing one fails the tests.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use common::client_contract::*;
use common::languages::{python, python_worker};
use common::{Engine, TestDb};
use serde_json::{Value, json};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/python");
const QUERIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../backlog-sql/queries");

/// Runs a Python snippet with `backlog_client` importable; returns its stdout.
fn python_eval(code: &str, args: &[&str]) -> String {
    let mut cmd = python();
    cmd.arg("-c")
        .arg(format!("import sys; args = sys.argv[1:]\n{code}"))
        .args(args);
    stdout_within(cmd, Duration::from_secs(30))
}

/// `python3 -m backlog_client enqueue URL QUEUE --jsonl FILE`: the plain INSERT, in one
/// transaction.
fn python_enqueue(db: &TestDb, queue: &str, jsonl: &str) -> usize {
    let mut cmd = python();
    cmd.args(["-m", "backlog_client", "enqueue", &db.url, queue, "--jsonl"])
        .arg(db.path(jsonl));
    let out = stdout_within(cmd, Duration::from_secs(30));
    out.trim().parse().unwrap()
}

#[test]
fn python_and_its_drivers_are_installed() {
    let version = python_eval(
        "import psycopg, pymysql; print(psycopg.__version__, pymysql.__version__)",
        &[],
    );
    assert!(!version.trim().is_empty());
}

/// The statements the client copies must be the library's files, byte for byte.
#[test]
fn python_copies_equal_the_query_files() {
    let copies: BTreeMap<String, String> = serde_json::from_str(&python_eval(
        "import json, backlog_client; print(json.dumps(backlog_client.QUERIES))",
        &[],
    ))
    .unwrap();
    assert!(
        copies.len() >= 30,
        "only {} statements copied",
        copies.len()
    );
    for (key, text) in &copies {
        let file = Path::new(QUERIES).join(key);
        let want = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("QUERIES[{key:?}]: {} unreadable: {e}", file.display()));
        assert!(
            *text == want,
            "QUERIES[{key:?}] in clients/python/src/backlog_client/_queries.py differs from {}: \
             copy the file",
            file.display()
        );
    }
}

/// 2,000 jobs (1,500 from Python's plain INSERT, 500 from `backlog enqueue --jsonl`), every tenth
/// failing its first attempt, worked at once by two Python consumers and two `backlog work`
/// processes. One Python consumer freezes holding a job and is killed with SIGKILL; its job is
/// rescued and completed by another worker. At the end every job is completed, each payload ran
/// at least once, each job was acked exactly once (by the process its row names), and the dead
/// consumer's stale token is refused by every fenced statement.
fn contract(engine: Engine) {
    let deadline = Instant::now() + Duration::from_secs(85);
    let db = TestDb::new(engine); // `backlog migrate`
    let (q, n, from_python) = ("contract", 2000_i64, 1500_i64);
    // A short lease, so the killed consumer's jobs are rescued within seconds; quick retries.
    db.ok(&[
        "queue",
        "set",
        q,
        "--lease",
        "3s",
        "--backoff-base",
        "100ms",
        "--backoff-max",
        "200ms",
    ]);
    write_jsonl(&db.path("py.jsonl"), 0..from_python);
    write_jsonl(&db.path("cli.jsonl"), from_python..n);
    assert_eq!(python_enqueue(&db, q, "py.jsonl") as i64, from_python);
    let out = db.ok(&["enqueue", q, "--jsonl", "cli.jsonl"]);
    assert_eq!(out.trim(), (n - from_python).to_string());
    assert_eq!(db.stats()[q]["available"], n, "{}", db.stats());

    let stall = db.path("stall.json");
    let mut victim = python_worker(
        &db,
        q,
        "py-a",
        &[
            "--stall-after",
            "40",
            "--stall-file",
            stall.to_str().unwrap(),
        ],
    );
    let others = [
        python_worker(&db, q, "py-b", &[]),
        backlog_worker(&db, q, "rust-a"),
        backlog_worker(&db, q, "rust-b"),
    ];

    // Wait until the victim holds its frozen job, then kill it without warning.
    while !stall.exists() {
        if let Some(status) = victim.child.try_wait().unwrap() {
            panic!(
                "py-a exited ({status}) before stalling: {}",
                victim.stderr()
            );
        }
        assert!(Instant::now() < deadline, "py-a never stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
    let frozen: Value = serde_json::from_str(&std::fs::read_to_string(&stall).unwrap()).unwrap();
    victim.child.kill().unwrap(); // SIGKILL
    victim.child.wait().unwrap();
    for p in others {
        p.finish(deadline);
    }

    // Nothing left: every job completed, as `backlog stats` tells.
    let stats = db.stats();
    let want = json!({"available": 0, "scheduled": 0, "retrying": 0, "running": 0, "completed": n, "dead": 0,
        "cancelled": 0, "held": 0, "waiting": 0, "archived": 0});
    assert_eq!(stats[q], want, "{stats}");
    let rows = rows(&db, q);
    assert_eq!(rows.len() as i64, n);
    assert!(rows.values().all(|r| r.state == "completed"));
    let payload_ids: BTreeSet<i64> = rows.values().map(|r| r.i).collect();
    assert_eq!(payload_ids, (0..n).collect(), "payload ids lost or doubled");

    // Every payload ran at least once, somewhere.
    let logs = ["py-a", "py-b", "rust-a", "rust-b"];
    let all: HashMap<&str, Vec<Event>> = logs.iter().map(|&l| (l, events(&db, l))).collect();
    let mut runs: BTreeMap<i64, usize> = BTreeMap::new();
    for e in all.values().flatten().filter(|e| e.what == "run") {
        *runs.entry(e.i).or_default() += 1;
    }
    assert_eq!(
        runs.keys().copied().collect::<BTreeSet<_>>(),
        payload_ids,
        "some payloads never ran"
    );

    // Acked exactly once: each Python ack that succeeded is the completion of record (the row
    // names that consumer as its last owner), no job was acked by two processes, and the jobs
    // no Python consumer acked were completed by `backlog work`, after running there.
    let mut acked_by: BTreeMap<i64, &str> = BTreeMap::new();
    for name in ["py-a", "py-b"] {
        for e in all[name].iter().filter(|e| e.what == "completed") {
            let before = acked_by.insert(e.id, name);
            assert!(before.is_none(), "job {} acked twice", e.id);
            let row = &rows[&e.id];
            assert_eq!(row.owner, name, "{name}'s ack of job {} was not kept", e.id);
            assert_eq!(row.i, e.i);
        }
    }
    let rust_runs: BTreeSet<(i64, i64)> = ["rust-a", "rust-b"]
        .iter()
        .flat_map(|l| all[l].iter())
        .filter(|e| e.what == "run")
        .map(|e| (e.id, e.attempt.unwrap()))
        .collect();
    let mut by_backlog = 0;
    for (id, row) in &rows {
        if acked_by.contains_key(id) {
            continue;
        }
        assert!(
            !row.owner.starts_with("py-"),
            "job {id} is {}'s but it never acked it",
            row.owner
        );
        assert!(
            rust_runs.contains(&(*id, row.attempt)),
            "job {id} completed by {} without its attempt {} running there",
            row.owner,
            row.attempt
        );
        by_backlog += 1;
    }
    let by_python = acked_by.len();
    assert_eq!(by_python as i64 + by_backlog, n);
    assert!(
        by_python > 100 && by_backlog > 100,
        "the work was not shared: {by_python} by Python, {by_backlog} by backlog work"
    );

    // The failing payloads failed once and were retried.
    let retried = rows.values().filter(|r| r.fail_once).count();
    assert_eq!(retried as i64, n / 10);
    for (id, row) in rows.iter().filter(|(_, r)| r.fail_once) {
        assert!(row.attempt >= 2, "job {id} failing once ended at attempt 1");
    }

    // The frozen job: rescued from the killed consumer and completed by another worker.
    let frozen_id = frozen["id"].as_i64().unwrap();
    let row = &rows[&frozen_id];
    assert_ne!(
        row.owner, "py-a",
        "the killed consumer's job was not rescued"
    );
    let errors = db.sql(&format!(
        "SELECT errors FROM backlog_job_all WHERE id = {frozen_id}"
    ));
    assert!(
        errors.contains("lease expired (worker py-a stopped heartbeating)"),
        "{errors}"
    );
    assert!(runs[&row.i] >= 2, "the frozen job did not run again");

    // The killed consumer's token is stale: ack, nack, heartbeat and release all report the lease
    // lost, and the row does not change.
    let before = db.sql(&format!(
        "SELECT state, attempt, errors FROM backlog_job_all WHERE id = {frozen_id}"
    ));
    let out = python_eval(
        "import json, backlog_client as b
c = b.connect(args[0])
job = b.Job(id=int(args[1]), queue=args[2], kind=None, payload=None, priority=0, attempt=1,
            max_attempts=None, run_at=0, created_at=0, token=int(args[3]), lease_expires_at=0)
print(json.dumps([c.ack(job), c.nack(job, 'stale'), c.heartbeat(job), c.release(job)]))",
        &[
            &db.url,
            &frozen_id.to_string(),
            q,
            &frozen["token"].to_string(),
        ],
    );
    assert_eq!(out.trim(), r#"[false, "lost", false, false]"#);
    assert_eq!(
        db.sql(&format!(
            "SELECT state, attempt, errors FROM backlog_job_all WHERE id = {frozen_id}"
        )),
        before
    );

    // Runs beyond the planned ones (a retry for fail_once): the frozen job, and any job whose
    // lease ran out under load. Each such run ended with its ack refused ("lost") or never made.
    let extra: usize = rows
        .values()
        .map(|r| runs[&r.i].saturating_sub(1 + usize::from(r.fail_once)))
        .sum();
    let lost = all.values().flatten().filter(|e| e.what == "lost").count();
    eprintln!(
        "{engine:?}: {n} jobs, {by_python} acked by Python, {by_backlog} by backlog work, \
         {retried} failed once and were retried, {extra} extra runs, {lost} refused Python \
         acks, {:.1} s",
        85.0 - deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    );
}

#[test]
fn sqlite_python_contract() {
    contract(Engine::Sqlite);
}

#[cfg(feature = "servers")]
#[test]
fn postgres_python_contract() {
    contract(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_python_contract() {
    contract(Engine::MySql);
}

/// What the big run does not reach: retention `delete` and `archive` (each dialect's other ack
/// statements), LIFO order (`job_claim_lifo.sql`), and heartbeats: jobs that take more than twice their
/// lease, with a second consumer rescuing beside them, run once and are acked.
fn details(engine: Engine) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let db = TestDb::new(engine);
    db.ok(&["queue", "set", "gone", "--retention", "delete"]);
    db.ok(&[
        "queue",
        "set",
        "kept",
        "--retention",
        "archive",
        "--order",
        "lifo",
    ]);
    db.ok(&["queue", "set", "slow", "--lease", "1s"]);
    std::fs::write(
        db.path("plain.jsonl"),
        (0..10)
            .map(|i| format!("{{\"i\": {i}}}\n"))
            .collect::<String>(),
    )
    .unwrap();
    assert_eq!(python_enqueue(&db, "gone", "plain.jsonl"), 10);
    assert_eq!(python_enqueue(&db, "kept", "plain.jsonl"), 10);
    assert_eq!(python_enqueue(&db, "slow", "plain.jsonl"), 10);
    let done = |name: &str| -> Vec<i64> {
        events(&db, name)
            .iter()
            .filter(|e| e.what == "completed")
            .map(|e| e.i)
            .collect()
    };

    python_worker(&db, "gone", "py-gone", &[]).finish(deadline);
    assert_eq!(done("py-gone").len(), 10);
    assert_eq!(
        db.sql("SELECT COUNT(*) FROM backlog_job_all WHERE queue = 'gone'")
            .trim(),
        "0"
    );

    // One consumer, batches of 4: LIFO runs the newest first.
    python_worker(&db, "kept", "py-kept", &["--batch", "4"]).finish(deadline);
    assert_eq!(done("py-kept"), (0..10).rev().collect::<Vec<_>>());
    let stats = db.stats();
    assert_eq!(stats["kept"]["archived"], 10, "{stats}");
    assert_eq!(
        db.sql(
            "SELECT COUNT(*) FROM backlog_job_archive WHERE queue = 'kept' AND state = 'completed'"
        )
        .trim(),
        "10"
    );

    // Each job takes 2.5 s against a 1 s lease; a consumer's second job waits 2.5 s for its turn.
    // Only heartbeats keep them from the rescue, which the consumers run before their claims and
    // the leader of a `backlog work` on another queue runs every second.
    let _rescuer = Proc::spawn(&db, "rescuer", db.cmd(&["work", "idle", "--", "true"]));
    let slow = ["--batch", "2", "--work-ms", "2500"];
    let a = python_worker(&db, "slow", "py-slow-a", &slow);
    let b = python_worker(&db, "slow", "py-slow-b", &slow);
    a.finish(deadline);
    b.finish(deadline);
    let mut runs: Vec<i64> = ["py-slow-a", "py-slow-b"]
        .iter()
        .flat_map(|n| events(&db, n))
        .filter(|e| e.what == "run")
        .map(|e| e.i)
        .collect();
    runs.sort();
    assert_eq!(
        runs,
        (0..10).collect::<Vec<_>>(),
        "a slow job ran twice or never"
    );
    assert_eq!(done("py-slow-a").len() + done("py-slow-b").len(), 10);
    assert_eq!(db.stats()["slow"]["completed"], 10);
}

#[test]
fn sqlite_python_details() {
    details(Engine::Sqlite);
}

#[cfg(feature = "servers")]
#[test]
fn postgres_python_details() {
    details(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_python_details() {
    details(Engine::MySql);
}

/// Python that opens the application's own connection to a test database, with the driver an
/// application would use (sqlite3, psycopg, PyMySQL), not the client's: `app_conn(url)`.
const APP_CONN: &str = r#"
import json, sqlite3, urllib.parse
import backlog_client as b
def app_conn(url):
    if url.startswith("sqlite://"):
        return sqlite3.connect(url[len("sqlite://"):])
    if url.startswith("postgres"):
        import psycopg
        return psycopg.connect(url)
    import pymysql
    u = urllib.parse.urlsplit(url)
    return pymysql.connect(host=u.hostname, port=u.port, user=u.username, password=u.password or "",
                           database=u.path.lstrip("/"))
"#;

fn python_app(code: &str, args: &[&str]) -> Value {
    let out = python_eval(&format!("{APP_CONN}\n{code}"), args);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Every option of the producer on the application's own connection, read back by `backlog job
/// show`; a taken unique key returns the job holding it; `enqueue_many` keeps the order.
fn producer(engine: Engine) {
    let db = TestDb::new(engine);
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let out = python_app(
        r#"import time
conn = app_conn(args[0])
before = time.time_ns() // 1000
first = b.enqueue(conn, "mail", {"to": "a@example.com", "n": 1}, priority=-7, delay=3600,
                  max_attempts=4, unique_key="welcome:42", kind="welcome", group="acct-42",
                  trace_context={"traceparent": args[1], "tracestate": "vendor=x"})
again = b.enqueue(conn, "mail", {"other": True}, unique_key="welcome:42")
at = b.enqueue(conn, "mail", [1, 2], run_at=1_700_000_000_000_000, trace_context=args[1])
many = b.enqueue_many(conn, [{"queue": "bulk", "payload": i, "priority": i} for i in range(5)])
mixed = b.enqueue_many(conn, [{"queue": "mix", "payload": i, **({"unique_key": f"k{i % 3}"} if i % 2 else {})}
                              for i in range(10)])
dup = b.enqueue_many(conn, [{"queue": "dup", "payload": 1, "unique_key": "d"},
                            {"queue": "dup", "payload": 2}, {"queue": "dup", "payload": 3, "unique_key": "d"}])
big = b.enqueue_many(conn, [{"queue": "big", "payload": {"i": i}} for i in range(2500)])
conn.commit()
print(json.dumps({"first": first, "again": again, "at": at, "many": many, "before": before,
                  "after": time.time_ns() // 1000, "mixed": mixed, "dup": dup, "big": big}))"#,
        &[&db.url, tp],
    );
    let job = every_option_kept(&db, &out, tp);
    let hour = 3_600_000_000_i64;
    let run_at = job["run_at"].as_i64().unwrap();
    let (before, after) = (
        out["before"].as_i64().unwrap(),
        out["after"].as_i64().unwrap(),
    );
    assert!(
        run_at >= before + hour - 5_000_000 && run_at <= after + hour + 5_000_000,
        "delay=3600: run_at {run_at} not an hour after {before}..{after}"
    );
    let at = job_show(&db, &out["at"]);
    assert_eq!(at["run_at"], 1_700_000_000_000_000_i64);
    assert_eq!(at["payload"], json!([1, 2]));
    assert_eq!(at["state"], "available");
    assert_eq!(at["traceparent"], tp);
    assert_eq!(at["tracestate"], Value::Null);
    assert_eq!(at["priority"], 0);
    let many: Vec<i64> = serde_json::from_value(out["many"].clone()).unwrap();
    assert_eq!(many.len(), 5);
    for (i, id) in many.iter().enumerate() {
        let job = job_show(&db, &json!(id));
        assert_eq!(
            (job["payload"].clone(), job["priority"].clone()),
            (json!(i), json!(i))
        );
    }
    assert!(
        many.windows(2).all(|w| w[0] < w[1]),
        "ids out of order: {many:?}"
    );
    // A batch mixing keyed and plain jobs (one statement for the chunk): a key repeated in it
    // answers its first job's id; the others are new, in order.
    let mixed: Vec<i64> = serde_json::from_value(out["mixed"].clone()).unwrap();
    assert_eq!((mixed[7], mixed[9]), (mixed[1], mixed[3]), "{mixed:?}");
    let made: Vec<(usize, i64)> = [0, 1, 2, 3, 4, 5, 6, 8]
        .iter()
        .map(|&i| (i, mixed[i]))
        .collect();
    assert!(
        made.windows(2).all(|w| w[0].1 < w[1].1),
        "ids out of order: {mixed:?}"
    );
    for (i, id) in made {
        assert_eq!(job_show(&db, &json!(id))["payload"], json!(i));
    }
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM backlog_job WHERE queue = 'mix'"),
        8
    );
    // A duplicate key inside one batch: one job, its id twice.
    let dup: Vec<i64> = serde_json::from_value(out["dup"].clone()).unwrap();
    assert_eq!(dup[0], dup[2], "{dup:?}");
    assert!(dup[1] > dup[0], "{dup:?}");
    assert_eq!(job_show(&db, &json!(dup[0]))["payload"], json!(1));
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM backlog_job WHERE queue = 'dup'"),
        2
    );
    // 2,500 jobs: three statements, every id in order.
    let big: Vec<i64> = serde_json::from_value(out["big"].clone()).unwrap();
    assert_eq!(big.len(), 2500);
    assert!(big.windows(2).all(|w| w[0] < w[1]), "ids out of order");
    for i in [0, 999, 1000, 2499] {
        assert_eq!(job_show(&db, &json!(big[i]))["payload"], json!({"i": i}));
    }
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM backlog_job WHERE queue = 'big'"),
        2500
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM backlog_job"),
        7 + 8 + 2 + 2500
    );
}

/// A job enqueued in the application's transaction exists exactly when that transaction
/// commits, with the application's own row.
fn transaction(engine: Engine) {
    let db = TestDb::new(engine);
    db.sql("CREATE TABLE app_order (id INT PRIMARY KEY)");
    let out = python_app(
        r#"conn = app_conn(args[0])
cur = conn.cursor()
mark = "?" if isinstance(conn, sqlite3.Connection) else "%s"
cur.execute(f"INSERT INTO app_order (id) VALUES ({mark})", (1,))
gone = b.enqueue(conn, "orders", {"order": 1})
conn.rollback()
cur.execute(f"INSERT INTO app_order (id) VALUES ({mark})", (2,))
kept = b.enqueue(conn, "orders", {"order": 2}, kind="ship")
conn.commit()
print(json.dumps({"gone": gone, "kept": kept}))"#,
        &[&db.url],
    );
    assert_eq!(db.sql("SELECT id FROM app_order").trim(), "2");
    assert_eq!(
        db.sql("SELECT id FROM backlog_job WHERE queue = 'orders'")
            .trim(),
        out["kept"].to_string()
    );
    assert_eq!(job_show(&db, &out["kept"])["payload"], json!({"order": 2}));
    let stats = db.stats();
    assert_eq!(stats["orders"]["available"], 1, "{stats}");

    // examples/python/web_enqueue.py: a good order commits its row and its job; an order
    // refused after both were written rolls back both.
    let out = python_app(
        r#"import io, wsgiref.util
sys.path.insert(0, args[1])
import web_enqueue
web_enqueue.create_tables(args[0])
app = web_enqueue.make_app(args[0])
def post(body):
    env = {}
    wsgiref.util.setup_testing_defaults(env)
    data = json.dumps(body).encode()
    env.update(REQUEST_METHOD="POST", PATH_INFO="/orders", CONTENT_LENGTH=str(len(data)),
               **{"wsgi.input": io.BytesIO(data)})
    status = []
    reply = json.loads(b"".join(app(env, lambda s, h: status.append(s))))
    return [status[0], reply]
print(json.dumps([post({"item": "book", "quantity": 2}), post({"item": "pen", "quantity": 0})]))"#,
        &[&db.url, EXAMPLES],
    );
    assert_eq!(out[0][0], "201 Created", "{out}");
    assert_eq!(out[1][0], "422 Unprocessable Entity", "{out}");
    let order = out[0][1]["order"].as_str().unwrap();
    assert_eq!(db.sql("SELECT id FROM shop_order").trim(), order);
    let job = job_show(&db, &out[0][1]["job"]);
    assert_eq!(job["payload"], json!({"order": order, "item": "book"}));
    assert_eq!(job["kind"], "ship");
    assert_eq!(db.stats()["orders"]["available"], 2);
}

/// Bad input is a typed error raised before anything is written, even when the caller commits
/// afterwards; a stale token is LeaseLost with `strict`; an older schema is SchemaTooOld.
fn errors(engine: Engine) {
    let db = TestDb::new(engine);
    let out = python_app(
        r#"import datetime
conn = app_conn(args[0])
bad = [
    ("payload", {}, {"f": float("nan")}, {}),
    ("payload", {}, {"s": {1, 2}}, {}),
    ("payload", {}, {"nul": "a\u0000b"}, {}),
    ("queue", "bad queue", {}, {}),
    ("queue", "x" * 129, {}, {}),
    ("kind", "q", {}, {"kind": "no/slash"}),
    ("unique", "q", {}, {"unique_key": "k" * 256}),
    ("group", "q", {}, {"group": ""}),
    ("priority", "q", {}, {"priority": 32768}),
    ("max_attempts", "q", {}, {"max_attempts": 0}),
    ("delay", "q", {}, {"delay": -1}),
    ("both", "q", {}, {"delay": 1, "run_at": 1}),
    ("naive", "q", {}, {"run_at": datetime.datetime(2030, 1, 1)}),
    ("trace", "q", {}, {"trace_context": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}),
]
seen = {}
for what, queue, payload, opts in bad:
    if what == "payload":
        queue = "q"
    try:
        b.enqueue(conn, queue, payload, **opts)
        seen[what + str(len(seen))] = "no error"
    except b.BacklogError as err:
        seen[what + str(len(seen))] = type(err).__name__
try:
    b.enqueue_many(conn, [{"queue": "q", "payload": 1}, {"queue": "q", "payload": 2, "kind": "a b"}])
    seen["many"] = "no error"
except b.InvalidName:
    seen["many"] = "InvalidName"
conn.commit()
client = b.connect(args[0])
try:
    client.enqueue("q", object())
except b.InvalidPayload:
    seen["client"] = "InvalidPayload"
client.enqueue("ok", {"n": 1})
job = client.claim("ok", 1)[0]
stale = b.Job(**{**job.__dict__, "token": job.token + 1})
seen["lenient"] = [client.ack(stale), client.nack(stale, "x"), client.heartbeat(stale), client.release(stale)]
for op in ("ack", "heartbeat", "release"):
    try:
        getattr(client, op)(stale, strict=True)
        seen[op] = "no error"
    except b.LeaseLost as err:
        seen[op] = [type(err).__name__, err.job_id == job.id]
try:
    client.nack(stale, "x", strict=True)
except b.LeaseLost:
    seen["nack"] = "LeaseLost"
seen["acked"] = client.ack(job)
client.enqueue_many([{"queue": "ok", "payload": {"n": i}} for i in range(3)])
jobs = client.claim("ok", 3)
stale = b.Job(**{**jobs[1].__dict__, "token": jobs[1].token + 1})
seen["ack_many"] = client.ack_many([jobs[0], stale, jobs[2]]) == {jobs[0].id, jobs[2].id}
seen["ack_many_left"] = client.ack_many([jobs[1]]) == {jobs[1].id}
client.enqueue_many([{"queue": "ok", "payload": {"n": i}} for i in range(4)])
jobs = client.claim("ok", 2)
stale = b.Job(**{**jobs[1].__dict__, "token": jobs[1].token + 1})
done, more = client.ack_and_claim([jobs[0], stale], "ok", 2)
seen["ack_and_claim"] = [done == {jobs[0].id}, len(more), {j.id for j in more} & {j.id for j in jobs} == set()]
seen["ack_and_claim_left"] = client.ack_many([jobs[1], *more]) == {jobs[1].id, *(j.id for j in more)}
print(json.dumps(seen))"#,
        &[&db.url],
    );
    let want = json!({
        "payload0": "InvalidPayload", "payload1": "InvalidPayload", "payload2": "InvalidPayload",
        "queue3": "InvalidName", "queue4": "InvalidName", "kind5": "InvalidName",
        "unique6": "InvalidName", "group7": "InvalidName", "priority8": "InvalidOption",
        "max_attempts9": "InvalidOption", "delay10": "InvalidOption", "both11": "InvalidOption",
        "naive12": "InvalidOption", "trace13": "InvalidOption", "many": "InvalidName",
        "client": "InvalidPayload", "lenient": [false, "lost", false, false],
        "ack": ["LeaseLost", true], "heartbeat": ["LeaseLost", true],
        "release": ["LeaseLost", true], "nack": "LeaseLost", "acked": true,
        "ack_many": true, "ack_many_left": true, "ack_and_claim": [true, 2, true],
        "ack_and_claim_left": true,
    });
    assert_eq!(out, want);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM backlog_job_all WHERE queue = 'q'"
        ),
        0,
        "bad input wrote a job"
    );
    assert_eq!(db.stats()["ok"]["completed"], 8);

    // A schema below the version the client speaks.
    db.sql("DELETE FROM backlog_migration WHERE version = 20");
    let out = python_app(
        r#"try:
    b.connect(args[0])
    print(json.dumps("connected"))
except b.SchemaTooOld as err:
    print(json.dumps([type(err).__name__, err.found, err.needed, str(err)]))"#,
        &[&db.url],
    );
    assert_eq!(out[0], "SchemaTooOld", "{out}");
    assert_eq!(
        (out[1].as_i64(), out[2].as_i64()),
        (Some(19), Some(20)),
        "{out}"
    );
    assert!(
        out[3].as_str().unwrap().contains("backlog migrate"),
        "{out}"
    );
}

/// A database without the schema: `connect` raises SchemaMissing (and leaves no SQLite file).
fn schema_missing(engine: Engine) {
    let db = TestDb::unmigrated(engine);
    let out = python_app(
        r#"try:
    b.connect(args[0])
    print(json.dumps("connected"))
except b.SchemaMissing as err:
    print(json.dumps([type(err).__name__, isinstance(err, b.BacklogError), str(err)]))"#,
        &[&db.url],
    );
    assert_eq!(out[0], "SchemaMissing", "{out}");
    assert_eq!(out[1], true);
    assert!(
        out[2].as_str().unwrap().contains("backlog migrate"),
        "{out}"
    );
    if engine == Engine::Sqlite {
        assert!(!Path::new(db.url.trim_start_matches("sqlite://")).exists());
    }
}

/// The asyncio API: enqueue, claim and ack as awaitables, and an AsyncConsumer with an `async
/// def` handler draining a queue (one job retried once) while `backlog stats` counts.
fn asyncio(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&[
        "queue",
        "set",
        "aq",
        "--backoff-base",
        "10ms",
        "--backoff-max",
        "20ms",
    ]);
    let out = python_app(
        r#"import asyncio
async def main():
    seen = {}
    async with b.AsyncClient(args[0]) as c:
        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ids = [await c.enqueue("aq", {"i": i}, priority=i, trace_context=tp) for i in range(3)]
        jobs = await c.claim("aq", 10)
        seen["claimed"] = [j.id for j in jobs] == ids
        seen["traced"] = all(json.loads(j.trace_context) == {"traceparent": tp} for j in jobs)
        seen["acked"] = [await c.ack(j) for j in jobs]
        await c.enqueue_many([{"queue": "aq", "payload": {"i": i}} for i in range(3, 8)])
        ran, outcomes = [], []
        async def handle(job):
            await asyncio.sleep(0)
            ran.append(job.payload["i"])
            if job.payload["i"] == 5 and job.attempt == 1:
                raise RuntimeError("once")
        consumer = b.AsyncConsumer(c, "aq", handle, batch=2,
                                   on_outcome=lambda job, o: outcomes.append(o))
        await asyncio.wait_for(consumer.run(drain=True), 20)
        seen["ran"] = sorted(ran)
        seen["outcomes"] = sorted(outcomes)
    return seen
print(json.dumps(asyncio.run(main())))"#,
        &[&db.url],
    );
    assert_eq!(
        out,
        json!({"claimed": true, "traced": true, "acked": [true, true, true], "ran": [3, 4, 5, 5, 6, 7],
               "outcomes": ["completed", "completed", "completed", "completed", "completed", "retry"]})
    );
    assert_eq!(db.stats()["aq"]["completed"], 8, "{}", db.stats());
}

/// The Python client over `backlog serve` (`backlog_client.http`), with a `produce` token: every
/// enqueue option read back by `backlog job show`; a taken unique key answers the holder's id; a
/// wrong token is `Unauthorized` and writes nothing; bad input is refused before any request; a
/// stale lease token is refused by every fenced call (`LeaseLost` with `strict`); the server's
/// own refusals are typed; an `HttpConsumer` drains a queue whose jobs partly fail (retried, then
/// completed, each exactly once); and SIGTERM lets the job in hand finish, then stops.
fn http(engine: Engine) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let db = TestDb::new(engine);
    db.ok(&[
        "queue",
        "set",
        "drain",
        "--backoff-base",
        "10ms",
        "--backoff-max",
        "20ms",
    ]);
    let (server, secret) = serve_with_token(&db);
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let out = python_app(
        r#"import collections, time
from backlog_client.http import HttpClient, HttpConsumer
base, secret, tp = args[0], args[1], args[2]
c = HttpClient(base, secret)
seen = {}
before = time.time_ns() // 1000
seen["first"] = c.enqueue("mail", {"to": "a@example.com", "n": 1}, priority=-7, delay=3600,
                          max_attempts=4, unique_key="welcome:42", kind="welcome", group="acct-42",
                          trace_context={"traceparent": tp, "tracestate": "vendor=x"})
seen["again"] = c.enqueue("mail", {"other": True}, unique_key="welcome:42")
seen["at"] = c.enqueue("mail", [1, 2], run_at=before + 7_200_000_000, trace_context=tp)
seen["many"] = c.enqueue_many([{"queue": "bulk", "payload": i, "priority": i} for i in range(5)])
seen["before"], seen["after"] = before, time.time_ns() // 1000

# A wrong token: Unauthorized, for a producer and a worker.
wrong = HttpClient(base, "not-the-secret-0123456789")
for op, call in (("enqueue", lambda: wrong.enqueue("wrong", {"n": 1})),
                 ("claim", lambda: wrong.claim("wrong", 1))):
    try:
        call()
        seen["wrong_" + op] = "no error"
    except b.Unauthorized as err:
        seen["wrong_" + op] = [type(err).__name__, isinstance(err, b.BacklogError), err.status,
                               err.code]

# Bad input: a typed error, and no request sent.
sent = c.requests
bad = [
    ("payload", {}, {"f": float("nan")}, {}),
    ("payload", {}, {"nul": "a\u0000b"}, {}),
    ("queue", "bad queue", {}, {}),
    ("kind", "q", {}, {"kind": "no/slash"}),
    ("unique", "q", {}, {"unique_key": "k" * 256}),
    ("group", "q", {}, {"group": ""}),
    ("priority", "q", {}, {"priority": 32768}),
    ("max_attempts", "q", {}, {"max_attempts": 0}),
    ("delay", "q", {}, {"delay": -1}),
    ("both", "q", {}, {"delay": 1, "run_at": 1}),
    ("trace", "q", {}, {"trace_context": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}),
]
for what, queue, payload, opts in bad:
    if what == "payload":
        queue = "q"
    try:
        c.enqueue(queue, payload, **opts)
        seen[what + str(len(seen))] = "no error"
    except b.BacklogError as err:
        seen[what + str(len(seen))] = type(err).__name__
try:
    c.enqueue_many([{"queue": "q", "payload": 1}, {"queue": "q", "payload": 2, "kind": "a b"}])
    seen["many_bad"] = "no error"
except b.InvalidName:
    seen["many_bad"] = "InvalidName"
for what, call in (("claim", lambda: c.claim("bad queue", 1)),
                   ("limit", lambda: c.claim("q", 0))):
    try:
        call()
        seen["bad_" + what] = "no error"
    except b.BacklogError as err:
        seen["bad_" + what] = type(err).__name__
seen["sent"] = c.requests - sent

# The server's own refusals, sent past the client's checks, are typed too.
for what, path, body in (("name", "/api/v1/jobs", {"queue": "bad queue", "payload": 1}),
                         ("option", "/api/v1/queues/q/claim", {"limit": 0})):
    try:
        c.request("POST", path, body)
        seen["server_" + what] = "no error"
    except b.BacklogError as err:
        cause = err.__cause__
        assert isinstance(cause, b.HttpError)
        seen["server_" + what] = [type(err).__name__, cause.status, cause.code]

# A stale lease token: refused by every fenced call.
c.enqueue("ok", {"n": 1})
job = c.claim("ok", 1, lease=30)[0]
stale = b.Job(**{**job.__dict__, "token": job.token + 1})
seen["lenient"] = [c.complete(stale), c.fail(stale, "x"), c.heartbeat(stale),
                   c.progress(stale, {"pct": 1})]
for op in ("complete", "heartbeat"):
    try:
        getattr(c, op)(stale, strict=True)
        seen["strict_" + op] = "no error"
    except b.LeaseLost as err:
        seen["strict_" + op] = [type(err).__name__, err.job_id == job.id]
try:
    c.fail(stale, "x", strict=True)
    seen["strict_fail"] = "no error"
except b.LeaseLost:
    seen["strict_fail"] = "LeaseLost"
seen["held"] = [c.heartbeat(job, lease=30), c.progress(job, {"pct": 50}), c.complete(job)]

# A consumer drains 30 jobs; some fail their first attempt (one by raising, one by Retry).
ids = c.enqueue_many([{"queue": "drain", "payload": {"i": i}} for i in range(30)])
runs, outcomes = collections.Counter(), collections.Counter()
completed = []
def handle(job):
    i = job.payload["i"]
    runs[i] += 1
    if job.attempt == 1 and i % 5 == 0:
        raise RuntimeError("fails once on purpose")
    if job.attempt == 1 and i % 5 == 1:
        raise b.Retry("later", 0.05)
def heard(job, outcome):
    outcomes[outcome] += 1
    if outcome == "completed":
        completed.append(job.id)
HttpConsumer(c, "drain", handle, batch=4, lease=5, on_outcome=heard).run(drain=True)
seen["drain_ids"] = ids
seen["drain_runs"] = [runs[i] for i in range(30)]
seen["drain_outcomes"] = dict(outcomes)
seen["drain_completed"] = sorted(completed) == sorted(ids)
print(json.dumps(seen))"#,
        &[&server.base, &secret, tp],
    );

    let job = every_option_kept(&db, &out, tp);
    let (before, after) = (
        out["before"].as_i64().unwrap(),
        out["after"].as_i64().unwrap(),
    );
    let hour = 3_600_000_000_i64;
    let near =
        |run_at: i64, d: i64| run_at >= before + d - 5_000_000 && run_at <= after + d + 5_000_000;
    let run_at = job["run_at"].as_i64().unwrap();
    assert!(
        near(run_at, hour),
        "delay=3600: run_at {run_at} not an hour after {before}..{after}"
    );
    let at = job_show(&db, &out["at"]);
    assert_eq!(at["payload"], json!([1, 2]));
    assert_eq!(at["traceparent"], tp);
    assert_eq!(at["tracestate"], Value::Null);
    let run_at = at["run_at"].as_i64().unwrap();
    assert!(
        near(run_at, 2 * hour),
        "run_at: {run_at} not two hours after {before}"
    );
    let many: Vec<i64> = serde_json::from_value(out["many"].clone()).unwrap();
    assert_eq!(many.len(), 5);
    for (i, id) in many.iter().enumerate() {
        let job = job_show(&db, &json!(id));
        assert_eq!(
            (
                job["queue"].clone(),
                job["payload"].clone(),
                job["priority"].clone()
            ),
            (json!("bulk"), json!(i), json!(i))
        );
    }
    assert!(
        many.windows(2).all(|w| w[0] < w[1]),
        "ids out of order: {many:?}"
    );

    let unauthorized = json!(["Unauthorized", true, 401, "unauthorized"]);
    assert_eq!(out["wrong_enqueue"], unauthorized, "{out}");
    assert_eq!(out["wrong_claim"], unauthorized, "{out}");
    let want = json!({
        "payload8": "InvalidPayload", "payload9": "InvalidPayload", "queue10": "InvalidName",
        "kind11": "InvalidName", "unique12": "InvalidName", "group13": "InvalidName",
        "priority14": "InvalidOption", "max_attempts15": "InvalidOption",
        "delay16": "InvalidOption", "both17": "InvalidOption", "trace18": "InvalidOption",
        "many_bad": "InvalidName", "bad_claim": "InvalidName", "bad_limit": "InvalidOption",
        "sent": 0,
        "server_name": ["InvalidName", 400, "queue_name_invalid"],
        "server_option": ["InvalidOption", 400, "value_out_of_range"],
        "lenient": [false, "lost", false, false],
        "strict_complete": ["LeaseLost", true], "strict_heartbeat": ["LeaseLost", true],
        "strict_fail": "LeaseLost", "held": [true, true, true],
    });
    for (key, value) in want.as_object().unwrap() {
        assert_eq!(&out[key], value, "{key}: {out}");
    }
    for queue in ["wrong", "q"] {
        assert_eq!(
            count(
                &db,
                &format!("SELECT COUNT(*) FROM backlog_job_all WHERE queue = '{queue}'")
            ),
            0,
            "a refused request wrote a job in {queue}"
        );
    }
    assert_eq!(db.stats()["ok"]["completed"], 1);

    // The drain: every job completed exactly once; the failing ones ran twice.
    let want_runs: Vec<i64> = (0..30).map(|i| if i % 5 < 2 { 2 } else { 1 }).collect();
    assert_eq!(out["drain_runs"], json!(want_runs), "{out}");
    assert_eq!(
        out["drain_outcomes"],
        json!({"completed": 30, "retry": 12}),
        "{out}"
    );
    assert_eq!(out["drain_completed"], true, "{out}");
    let rows = rows(&db, "drain");
    assert_eq!(rows.len(), 30);
    for row in rows.values() {
        assert_eq!(row.state, "completed", "job {} not completed", row.i);
        let want = if row.i % 5 < 2 { 2 } else { 1 };
        assert_eq!(row.attempt, want, "job {} attempts", row.i);
    }
    assert_eq!(db.stats()["drain"]["completed"], 30, "{}", db.stats());

    // SIGTERM while a job runs: it finishes and is completed, the rest of the batch is given
    // back, and the process exits 0.
    let mut cmd = python();
    cmd.arg("-c")
        .arg(
            r#"import sys, time
from backlog_client.http import HttpClient, HttpConsumer
c = HttpClient(sys.argv[1], sys.argv[2])
c.enqueue_many([{"queue": "term", "payload": {"i": i}} for i in range(3)])
def handle(job):
    print("start", job.id, flush=True)
    time.sleep(1.5)
HttpConsumer(c, "term", handle, batch=3, grace_s=10,
             on_outcome=lambda job, o: print(o, job.id, flush=True)).run()
print("stopped", flush=True)"#,
        )
        .args([&server.base, &secret]);
    let mut term = Proc::spawn(&db, "term", cmd);
    let started = || std::fs::read_to_string(db.path("term.out")).unwrap_or_default();
    while !started().contains("start") {
        assert!(
            Instant::now() < deadline,
            "no job started: {}",
            term.stderr()
        );
        assert!(
            term.child.try_wait().unwrap().is_none(),
            "the consumer exited: {}",
            term.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(term.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    term.finish(deadline);
    let lines: Vec<String> = started().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[1].starts_with("completed "), "{lines:?}");
    assert_eq!(lines[2], "stopped");
    let stats = db.stats();
    assert_eq!(stats["term"]["completed"], 1, "{stats}");
    assert_eq!(stats["term"]["running"], 0, "{stats}");
    assert_eq!(
        stats["term"]["available"].as_i64().unwrap() + stats["term"]["retrying"].as_i64().unwrap(),
        2,
        "{stats}"
    );
    drop(server);
}

on_every_backend! {
    python_producer => producer,
    python_transaction => transaction,
    python_errors => errors,
    python_schema_missing => schema_missing,
    python_asyncio => asyncio,
    python_http => http,
}
