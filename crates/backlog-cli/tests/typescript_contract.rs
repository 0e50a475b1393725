//! The SQL contract (docs/sql.md) driven from TypeScript: the package of `clients/typescript`
//! (built here with its own `tsc`, run by Node from its source tree) enqueues with the catalog's
//! multi-row INSERT and works queues with the catalog's claim, complete, fail, heartbeat, release
//! and rescue statements, beside `backlog work` on the same queue, on SQLite, PostgreSQL and
//! MariaDB; its producer writes on the application's own connection (better-sqlite3, pg,
//! mysql2) inside the application's transaction and refuses bad input with typed errors before
//! writing anything; over HTTP it enqueues and works a queue through `backlog serve` with a
//! token. Node and the package's npm dependencies (`npm ci` in clients/typescript, which
//! `scripts/services.sh` runs) are required: a missing one fails the tests.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::client_contract::*;
use common::languages::{node, ts_worker};
use common::{Engine, TestDb};
use serde_json::{Value, json};

/// The package, as `npm install ./clients/typescript` would install it.
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/typescript");
const QUERIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../backlog-sql/queries");
const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Runs an ES module snippet with `b` (the package), `args` (the arguments) and `appConn(url)`
/// (the application's own connection, with the driver an application would use) in scope;
/// returns what it printed, as JSON.
fn ts_eval(code: &str, args: &[&str]) -> Value {
    let mut cmd = node();
    cmd.args(["--input-type=module", "-e"])
        .arg(format!("{PRELUDE}\n{code}"))
        .args(args);
    let out = stdout_within(cmd, Duration::from_secs(45));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

const PRELUDE: &str = r#"
import * as b from "backlog-client";
import Database from "better-sqlite3";
import pg from "pg";
import mysql from "mysql2/promise";
const args = process.argv.slice(1);
const print = (v) => console.log(JSON.stringify(v));
async function appConn(url) {
  if (url.startsWith("sqlite://")) {
    const conn = new Database(url.slice("sqlite://".length));
    return { conn, sql: async (s) => conn.exec(s), close: async () => conn.close() };
  }
  if (url.startsWith("postgres")) {
    const conn = new pg.Client({ connectionString: url });
    await conn.connect();
    return { conn, sql: (s) => conn.query(s), close: () => conn.end() };
  }
  const u = new URL(url);
  const conn = await mysql.createConnection({ host: u.hostname, port: Number(u.port), user: u.username,
                                              database: u.pathname.slice(1) });
  return { conn, sql: (s) => conn.query(s), close: () => conn.end() };
}
"#;

#[test]
fn typescript_and_its_dependencies_are_installed() {
    let out = ts_eval(
        "print([b.VERSION, b.SCHEMA_VERSION, typeof pg.Client, typeof mysql.createConnection, typeof Database])",
        &[],
    );
    assert_eq!(
        out,
        json!(["0.20.0", 20, "function", "function", "function"])
    );
    let package: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(CLIENT).join("package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        package["version"], "0.20.0",
        "the version follows the schema"
    );
}

/// The statements the client sends are the library's files, byte for byte.
#[test]
fn typescript_copies_equal_the_query_files() {
    let copies: BTreeMap<String, String> =
        serde_json::from_value(ts_eval("print(b.QUERIES)", &[])).unwrap();
    assert!(
        copies.len() >= 50,
        "only {} statements copied",
        copies.len()
    );
    for (key, text) in &copies {
        let file = Path::new(QUERIES).join(key);
        let want = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("QUERIES[{key:?}]: {} unreadable: {e}", file.display()));
        assert!(
            *text == want,
            "QUERIES[{key:?}] in clients/typescript/src/queries.ts differs from {}: run \
             `node scripts/queries.mjs` in clients/typescript",
            file.display()
        );
    }
}

/// 600 jobs (400 from the TypeScript producer, 200 from `backlog enqueue --jsonl`), every tenth
/// failing its first attempt. A TypeScript worker works them alone until it freezes holding a
/// job, and is killed with SIGKILL; a second TypeScript worker and `backlog work` drain the
/// rest together, and the frozen job is rescued and completed by one of them. At the end every job is completed exactly once (by the process
/// its row names), jobs of each producer were worked by each kind of worker, and the dead
/// worker's stale token is refused by every fenced statement.
fn contract(engine: Engine) {
    let deadline = Instant::now() + Duration::from_secs(50);
    let db = TestDb::new(engine);
    let (q, n, from_ts) = ("contract", 600_i64, 400_i64);
    db.ok(&[
        "queue",
        "set",
        q,
        "--lease",
        "2s",
        "--backoff-base",
        "50ms",
        "--backoff-max",
        "100ms",
    ]);
    let out = ts_eval(
        r#"const c = await b.Client.connect(args[0]);
const jobs = [];
for (let i = 0; i < 400; i++) jobs.push({ queue: args[1], payload: i % 10 === 3 ? { i, fail_once: true } : { i } });
const ids = await c.enqueueMany(jobs);
await c.close();
print(ids.length)"#,
        &[&db.url, q],
    );
    assert_eq!(out, json!(from_ts));
    write_jsonl(&db.path("cli.jsonl"), from_ts..n);
    assert_eq!(
        db.ok(&["enqueue", q, "--jsonl", "cli.jsonl"]).trim(),
        (n - from_ts).to_string()
    );
    assert_eq!(db.stats()[q]["available"], n, "{}", db.stats());

    let stall = db.path("stall.json");
    let mut victim = ts_worker(
        &db,
        q,
        "ts-a",
        &[
            "--stall-after",
            "15",
            "--stall-file",
            stall.to_str().unwrap(),
            "--concurrency",
            "1",
            "--batch",
            "1",
        ],
    );
    // The victim first, alone, until it freezes: the others could otherwise drain the queue
    // before it has held its sixteenth job.
    while !stall.exists() {
        if let Some(status) = victim.child.try_wait().unwrap() {
            panic!(
                "ts-a exited ({status}) before stalling: {}",
                victim.stderr()
            );
        }
        assert!(Instant::now() < deadline, "ts-a never stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
    let others = [
        ts_worker(&db, q, "ts-b", &["--work-ms", "2"]),
        backlog_worker(&db, q, "rust-a"),
    ];
    let frozen: Value = serde_json::from_str(&std::fs::read_to_string(&stall).unwrap()).unwrap();
    victim.child.kill().unwrap(); // SIGKILL
    victim.child.wait().unwrap();
    for p in others {
        p.finish(deadline);
    }

    let stats = db.stats();
    let want = json!({"available": 0, "scheduled": 0, "retrying": 0, "running": 0, "completed": n, "dead": 0,
        "cancelled": 0, "held": 0, "waiting": 0, "archived": 0});
    assert_eq!(stats[q], want, "{stats}");
    let rows = rows(&db, q);
    assert_eq!(rows.len() as i64, n);
    let payload_ids: BTreeSet<i64> = rows.values().map(|r| r.i).collect();
    assert_eq!(payload_ids, (0..n).collect(), "payload ids lost or doubled");

    // Completed exactly once: each completion a TypeScript worker heard is the one of record
    // (its row names that worker), no job was completed by two, and the others were completed
    // by `backlog work` after running there.
    let logs: BTreeMap<&str, Vec<Event>> = ["ts-a", "ts-b", "rust-a"]
        .iter()
        .map(|&l| (l, events(&db, l)))
        .collect();
    let mut done_by: BTreeMap<i64, &str> = BTreeMap::new();
    for name in ["ts-a", "ts-b"] {
        for e in logs[name].iter().filter(|e| e.what == "completed") {
            assert!(
                done_by.insert(e.id, name).is_none(),
                "job {} completed twice",
                e.id
            );
            assert_eq!(
                rows[&e.id].owner, name,
                "{name}'s completion of job {} was not kept",
                e.id
            );
        }
    }
    let rust_runs: BTreeSet<(i64, i64)> = logs["rust-a"]
        .iter()
        .filter(|e| e.what == "run")
        .map(|e| (e.id, e.attempt.unwrap()))
        .collect();
    let (mut ts_by_rust, mut cli_by_ts) = (0, 0);
    for (id, row) in &rows {
        if done_by.contains_key(id) {
            cli_by_ts += usize::from(row.i >= from_ts);
            continue;
        }
        assert!(
            !row.owner.starts_with("ts-"),
            "job {id} is {}'s but it never completed it",
            row.owner
        );
        assert!(
            rust_runs.contains(&(*id, row.attempt)),
            "job {id} completed by {} without its attempt {} running there",
            row.owner,
            row.attempt
        );
        ts_by_rust += usize::from(row.i < from_ts);
    }
    assert!(
        ts_by_rust > 0 && cli_by_ts > 0,
        "the work was not shared: {ts_by_rust} TypeScript-made jobs done by backlog work, \
         {cli_by_ts} `backlog enqueue` jobs done by TypeScript"
    );
    for (id, row) in rows.iter().filter(|(_, r)| r.fail_once) {
        assert!(row.attempt >= 2, "job {id} failing once ended at attempt 1");
    }

    // The frozen job: rescued from the killed worker and completed by another.
    let frozen_id = frozen["id"].as_i64().unwrap();
    assert_ne!(
        rows[&frozen_id].owner, "ts-a",
        "the killed worker's job was not rescued"
    );
    let errors = db.sql(&format!(
        "SELECT errors FROM backlog_job_all WHERE id = {frozen_id}"
    ));
    assert!(
        errors.contains("lease expired (worker ts-a stopped heartbeating)"),
        "{errors}"
    );

    // Its token is stale: complete, fail, heartbeat, release and cancel report the lease lost,
    // and the row does not change.
    let before = db.sql(&format!(
        "SELECT state, attempt, errors FROM backlog_job_all WHERE id = {frozen_id}"
    ));
    let out = ts_eval(
        r#"const c = await b.Client.connect(args[0]);
const job = { id: Number(args[1]), queue: args[2], kind: null, payload: null, priority: 0, attempt: 1,
  maxAttempts: null, runAt: 0, createdAt: 0, token: BigInt(args[3]), leaseExpiresAt: 0,
  traceContext: null, group: null, lost: false, cancelRequested: false };
print([await c.complete(job), await c.fail(job, "stale"), await c.heartbeat(job), await c.release(job),
       await c.cancel(job)]);
await c.close()"#,
        &[
            &db.url,
            &frozen_id.to_string(),
            q,
            frozen["token"].as_str().unwrap(),
        ],
    );
    assert_eq!(out, json!([false, "lost", false, false, false]));
    assert_eq!(
        db.sql(&format!(
            "SELECT state, attempt, errors FROM backlog_job_all WHERE id = {frozen_id}"
        )),
        before
    );
}

/// Every option of the producer on the application's own connection, read back by `backlog job
/// show`; unique keys (taken by a job already there, or twice in one batch) answer the holder;
/// `enqueueMany` keeps the order; and a job exists exactly when the application's transaction
/// commits. The queue is then drained by `backlog work`.
fn producer(engine: Engine) {
    let db = TestDb::new(engine);
    db.sql("CREATE TABLE app_order (id INT PRIMARY KEY)");
    let out = ts_eval(
        r#"const app = await appConn(args[0]);
const seen = {};
seen.before = Date.now() * 1000;
seen.first = await b.enqueue(app.conn, "mail", { to: "a@example.com", n: 1 }, { priority: -7, delay: 3600,
  maxAttempts: 4, uniqueKey: "welcome:42", kind: "welcome", group: "acct-42",
  traceContext: { traceparent: args[1], tracestate: "vendor=x" } });
seen.again = await b.enqueue(app.conn, "mail", { other: true }, { uniqueKey: "welcome:42" });
seen.at = await b.enqueue(app.conn, "mail", [1, 2], { runAt: 1_700_000_000_000_000, traceContext: args[1] });
seen.after = Date.now() * 1000;
seen.many = await b.enqueueMany(app.conn, [0, 1, 2, 3, 4].map((i) => ({ queue: "bulk", payload: i, priority: i })));
seen.keyed = await b.enqueueMany(app.conn, [
  { queue: "bulk", payload: "k1", uniqueKey: "k" }, { queue: "bulk", payload: "k2", uniqueKey: "k" },
  { queue: "bulk", payload: "plain" }, { queue: "mail", payload: "k3", uniqueKey: "welcome:42" }]);
await app.sql("BEGIN");
await app.sql("INSERT INTO app_order (id) VALUES (1)");
seen.gone = await b.enqueue(app.conn, "orders", { order: 1 });
await app.sql("ROLLBACK");
await app.sql("BEGIN");
await app.sql("INSERT INTO app_order (id) VALUES (2)");
seen.kept = await b.enqueueMany(app.conn, [{ queue: "orders", payload: { order: 2 }, uniqueKey: "o2", kind: "ship" }]);
await app.sql("COMMIT");
await app.close();
print(seen)"#,
        &[&db.url, TP],
    );
    let job = every_option_kept(&db, &out, TP);
    let (before, after) = (
        out["before"].as_i64().unwrap(),
        out["after"].as_i64().unwrap(),
    );
    let hour = 3_600_000_000_i64;
    let run_at = job["run_at"].as_i64().unwrap();
    assert!(
        run_at >= before + hour - 5_000_000 && run_at <= after + hour + 5_000_000,
        "delay 3600: run_at {run_at} not an hour after {before}..{after}"
    );
    let at = job_show(&db, &out["at"]);
    assert_eq!(at["run_at"], 1_700_000_000_000_000_i64);
    assert_eq!(at["payload"], json!([1, 2]));
    assert_eq!(
        (at["traceparent"].as_str(), &at["tracestate"]),
        (Some(TP), &Value::Null)
    );
    let many: Vec<i64> = serde_json::from_value(out["many"].clone()).unwrap();
    for (i, id) in many.iter().enumerate() {
        let job = job_show(&db, &json!(id));
        assert_eq!((&job["payload"], &job["priority"]), (&json!(i), &json!(i)));
    }
    assert!(
        many.windows(2).all(|w| w[0] < w[1]),
        "ids out of order: {many:?}"
    );
    let keyed = &out["keyed"];
    assert_eq!(
        keyed[0], keyed[1],
        "one key twice in a batch made two jobs: {out}"
    );
    assert_eq!(keyed[3], out["first"], "a held key made a job: {out}");
    assert_eq!(job_show(&db, &keyed[0])["payload"], "k1");
    assert_eq!(job_show(&db, &keyed[2])["payload"], "plain");

    assert_eq!(db.sql("SELECT id FROM app_order").trim(), "2");
    assert_eq!(
        db.sql("SELECT id FROM backlog_job WHERE queue = 'orders'")
            .trim(),
        out["kept"][0].to_string()
    );
    assert_eq!(job_show(&db, &out["kept"][0])["kind"], "ship");

    // `backlog work` drains what the TypeScript producer made.
    let deadline = Instant::now() + Duration::from_secs(30);
    backlog_worker(&db, "bulk", "rust").finish(deadline);
    assert_eq!(db.stats()["bulk"]["completed"], 7, "{}", db.stats());
}

/// Bad input is a typed error thrown before anything is written; a stale token is LeaseLost
/// with `strict`; an older schema is SchemaTooOld; no schema is SchemaMissing.
fn errors(engine: Engine) {
    let db = TestDb::new(engine);
    let out = ts_eval(
        r#"const app = await appConn(args[0]);
const seen = {};
const bad = [
  ["payload", "q", { f: NaN }, {}], ["payload", "q", { f: () => 1 }, {}], ["payload", "q", { n: 1n }, {}],
  ["payload", "q", { nul: "a\u0000b" }, {}], ["payload", "q", new Map(), {}],
  ["queue", "bad queue", {}, {}], ["queue", "x".repeat(129), {}, {}],
  ["kind", "q", {}, { kind: "no/slash" }], ["unique", "q", {}, { uniqueKey: "k".repeat(256) }],
  ["group", "q", {}, { group: "" }], ["priority", "q", {}, { priority: 32768 }],
  ["max_attempts", "q", {}, { maxAttempts: 0 }], ["delay", "q", {}, { delay: -1 }],
  ["both", "q", {}, { delay: 1, runAt: 1 }], ["unknown", "q", {}, { prio: 1 }],
  ["trace", "q", {}, { traceContext: "00-" + "0".repeat(32) + "-00f067aa0ba902b7-01" }],
];
for (const [what, queue, payload, opts] of bad) {
  try {
    await b.enqueue(app.conn, queue, payload, opts);
    seen[what + Object.keys(seen).length] = "no error";
  } catch (err) {
    seen[what + Object.keys(seen).length] = [err.constructor.name, err instanceof b.BacklogError];
  }
}
try {
  await b.enqueueMany(app.conn, [{ queue: "q", payload: 1 }, { queue: "q", payload: 2, kind: "a b" }]);
  seen.many = "no error";
} catch (err) { seen.many = err.constructor.name; }
await app.close();
const c = await b.Client.connect(args[0]);
await c.enqueue("ok", { n: 1 });
const [job] = await c.claim("ok", 1);
const stale = { ...job, token: job.token + 1n };
seen.lenient = [await c.complete(stale), await c.fail(stale, "x"), await c.heartbeat(stale), await c.release(stale)];
for (const op of ["complete", "heartbeat", "release", "cancel"]) {
  try {
    await (op === "cancel" ? c.cancel(stale, "x", { strict: true }) : c[op](stale, { strict: true }));
    seen[op] = "no error";
  } catch (err) { seen[op] = [err.constructor.name, err.jobId === job.id]; }
}
try { await c.fail(stale, "x", { strict: true }); } catch (err) { seen.fail = err.constructor.name; }
seen.completed = await c.complete(job);
await c.close();
print(seen)"#,
        &[&db.url],
    );
    let typed = |name: &str| json!([name, true]);
    let want = json!({
        "payload0": typed("InvalidPayload"), "payload1": typed("InvalidPayload"),
        "payload2": typed("InvalidPayload"), "payload3": typed("InvalidPayload"),
        "payload4": typed("InvalidPayload"), "queue5": typed("InvalidName"),
        "queue6": typed("InvalidName"), "kind7": typed("InvalidName"), "unique8": typed("InvalidName"),
        "group9": typed("InvalidName"), "priority10": typed("InvalidOption"),
        "max_attempts11": typed("InvalidOption"), "delay12": typed("InvalidOption"),
        "both13": typed("InvalidOption"), "unknown14": typed("InvalidOption"),
        "trace15": typed("InvalidOption"), "many": "InvalidName",
        "lenient": [false, "lost", false, false],
        "complete": ["LeaseLost", true], "heartbeat": ["LeaseLost", true],
        "release": ["LeaseLost", true], "cancel": ["LeaseLost", true], "fail": "LeaseLost",
        "completed": true,
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
    assert_eq!(db.stats()["ok"]["completed"], 1);

    // A schema below the version the client speaks; then none at all.
    db.sql("DELETE FROM backlog_migration WHERE version = 20");
    let connect = r#"try {
  await b.Client.connect(args[0]);
  print("connected");
} catch (err) {
  print([err.constructor.name, err instanceof b.BacklogError, err.found ?? null, err.needed ?? null, err.message]);
}"#;
    let out = ts_eval(connect, &[&db.url]);
    assert_eq!(
        out.as_array().unwrap()[..4],
        [json!("SchemaTooOld"), json!(true), json!(19), json!(20)]
    );
    assert!(
        out[4].as_str().unwrap().contains("backlog migrate"),
        "{out}"
    );
    let bare = TestDb::unmigrated(engine);
    let out = ts_eval(connect, &[&bare.url]);
    assert_eq!(out[0], "SchemaMissing", "{out}");
    assert!(
        out[4].as_str().unwrap().contains("backlog migrate"),
        "{out}"
    );
    if engine == Engine::Sqlite {
        assert!(!Path::new(bare.url.trim_start_matches("sqlite://")).exists());
    }
}

/// A paused queue hands out nothing; resumed, a claim takes its jobs in order (priority, then
/// enqueue order); a worker drains the rest, retrying a job that fails once with the queue's
/// backoff; and SIGTERM lets the job in hand finish, gives the rest back, and exits 0.
fn pause_order_and_stop(engine: Engine) {
    let deadline = Instant::now() + Duration::from_secs(40);
    let db = TestDb::new(engine);
    db.ok(&[
        "queue",
        "set",
        "p",
        "--backoff-base",
        "10ms",
        "--backoff-max",
        "20ms",
    ]);
    db.ok(&["queue", "pause", "p"]);
    let out = ts_eval(
        r#"const c = await b.Client.connect(args[0]);
const ids = await c.enqueueMany([3, 1, 2, 1, 0].map((p, i) => ({ queue: "p", payload: { i, p }, priority: p })));
const paused = await c.claim("p", 10);
await c.close();
print({ ids, paused: paused.length })"#,
        &[&db.url],
    );
    assert_eq!(out["paused"], 0, "a paused queue handed out jobs");
    db.ok(&["queue", "resume", "p"]);
    let out = ts_eval(
        r#"const c = await b.Client.connect(args[0]);
const jobs = await c.claim("p", 3);
const order = jobs.map((j) => j.payload.i);
print({ order, done: [...await c.completeMany(jobs)].length });
await c.close()"#,
        &[&db.url],
    );
    assert_eq!(out, json!({"order": [4, 1, 3], "done": 3}));
    let out = ts_eval(
        r#"const outcomes = {};
let runs = 0;
const w = new b.Worker(args[0], "p", (job) => { runs++; if (job.attempt === 1 && job.payload.i === 2) throw new Error("once"); },
  { signals: false, onOutcome: (job, o) => (outcomes[o] = (outcomes[o] ?? 0) + 1) });
await w.run({ drain: true });
print({ runs, outcomes })"#,
        &[&db.url],
    );
    assert_eq!(
        out,
        json!({"runs": 3, "outcomes": {"completed": 2, "retry": 1}})
    );
    assert_eq!(db.stats()["p"]["completed"], 5);

    // SIGTERM while a job runs: it finishes and is completed, the others held are given back.
    let mut cmd = node();
    cmd.args(["--input-type=module", "-e"])
        .arg(format!(
            "{PRELUDE}\n{}",
            r#"const c = await b.Client.connect(args[0]);
await c.enqueueMany([0, 1, 2].map((i) => ({ queue: "term", payload: { i } })));
await c.close();
const w = new b.Worker(args[0], "term", async (job) => {
  console.log("start", job.id);
  await new Promise((r) => setTimeout(r, job.payload.i === 0 ? 1500 : 60_000));
}, { concurrency: 3, graceMs: 4000, onOutcome: (job, o) => console.log(o, job.id) });
await w.run();
console.log("stopped");
process.exit(0)"#
        ))
        .arg(&db.url);
    let mut term = Proc::spawn(&db, "term", cmd);
    let started = || std::fs::read_to_string(db.path("term.out")).unwrap_or_default();
    while started().matches("start").count() < 3 {
        assert!(
            Instant::now() < deadline,
            "the jobs did not start: {}",
            term.stderr()
        );
        assert!(
            term.child.try_wait().unwrap().is_none(),
            "the worker exited: {}",
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
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert!(lines[3].starts_with("completed "), "{lines:?}");
    assert_eq!(lines[4], "stopped");
    let stats = db.stats();
    assert_eq!(stats["term"]["completed"], 1, "{stats}");
    assert_eq!(stats["term"]["running"], 0, "{stats}");
    assert_eq!(
        stats["term"]["available"], 2,
        "released, not failed: {stats}"
    );
}

/// The TypeScript client over `backlog serve` with a `produce` token: every enqueue option read
/// back; a wrong token is Unauthorized and writes nothing; bad input sends no request; the
/// server's own refusals are typed; a stale lease token is refused by every fenced call; an
/// HttpWorker drains a queue whose jobs partly fail, each completed exactly once.
fn http(engine: Engine) {
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
    let out = ts_eval(
        r#"const [base, secret, tp] = args;
const c = new b.HttpClient(base, secret);
const seen = {};
seen.before = Date.now() * 1000;
seen.first = await c.enqueue("mail", { to: "a@example.com", n: 1 }, { priority: -7, delay: 3600,
  maxAttempts: 4, uniqueKey: "welcome:42", kind: "welcome", group: "acct-42",
  traceContext: { traceparent: tp, tracestate: "vendor=x" } });
seen.again = await c.enqueue("mail", { other: true }, { uniqueKey: "welcome:42" });
seen.many = await c.enqueueMany([0, 1, 2, 3, 4].map((i) => ({ queue: "bulk", payload: i, priority: i })));
const wrong = new b.HttpClient(base, "not-the-secret-0123456789");
for (const [op, call] of [["enqueue", () => wrong.enqueue("wrong", { n: 1 })], ["claim", () => wrong.claim("wrong", 1)]]) {
  try { await call(); seen["wrong_" + op] = "no error"; }
  catch (err) { seen["wrong_" + op] = [err.constructor.name, err instanceof b.BacklogError, err.status, err.code]; }
}
const sent = c.requests;
const bad = [
  () => c.enqueue("q", { f: NaN }), () => c.enqueue("bad queue", {}), () => c.enqueue("q", {}, { kind: "no/slash" }),
  () => c.enqueue("q", {}, { priority: 32768 }), () => c.enqueueMany([{ queue: "q", payload: 1, kind: "a b" }]),
  () => c.claim("bad queue", 1), () => c.claim("q", 0),
];
seen.bad = [];
for (const call of bad) {
  try { await call(); seen.bad.push("no error"); } catch (err) { seen.bad.push(err.constructor.name); }
}
seen.sent = c.requests - sent;
try { await c.request("POST", "/api/v1/jobs", { queue: "bad queue", payload: 1 }); }
catch (err) { seen.server = [err.constructor.name, err.cause?.status, err.cause?.code]; }
await c.enqueue("ok", { n: 1 });
const [job] = await c.claim("ok", 1, { leaseMs: 30_000 });
const stale = { ...job, token: job.token + 1n };
seen.lenient = [await c.complete(stale), await c.fail(stale, "x"), await c.heartbeat(stale), await c.progress(stale, { pct: 1 })];
try { await c.complete(stale, { strict: true }); } catch (err) { seen.strict = [err.constructor.name, err.jobId === job.id]; }
seen.held = [await c.heartbeat(job), await c.progress(job, { pct: 50 }), await c.complete(job)];
const ids = await c.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ queue: "drain", payload: { i } })));
const runs = Array(30).fill(0);
const outcomes = {};
const completed = [];
await new b.HttpWorker(c, "drain", (job) => {
  const i = job.payload.i;
  runs[i]++;
  if (job.attempt === 1 && i % 5 === 0) throw new Error("fails once on purpose");
  if (job.attempt === 1 && i % 5 === 1) throw new b.Retry("later", 0.05);
}, { batch: 4, concurrency: 3, leaseMs: 5000, signals: false, onOutcome: (job, o) => {
  outcomes[o] = (outcomes[o] ?? 0) + 1;
  if (o === "completed") completed.push(job.id);
} }).run({ drain: true });
seen.runs = runs;
seen.outcomes = outcomes;
seen.all = JSON.stringify([...completed].sort()) === JSON.stringify([...ids].sort());
print(seen)"#,
        &[&server.base, &secret, TP],
    );
    every_option_kept(&db, &out, TP);
    let many: Vec<i64> = serde_json::from_value(out["many"].clone()).unwrap();
    for (i, id) in many.iter().enumerate() {
        let job = job_show(&db, &json!(id));
        assert_eq!((&job["payload"], &job["priority"]), (&json!(i), &json!(i)));
    }
    let unauthorized = json!(["Unauthorized", true, 401, "unauthorized"]);
    assert_eq!(out["wrong_enqueue"], unauthorized, "{out}");
    assert_eq!(out["wrong_claim"], unauthorized, "{out}");
    let want = json!({
        "bad": ["InvalidPayload", "InvalidName", "InvalidName", "InvalidOption", "InvalidName",
                "InvalidName", "InvalidOption"],
        "sent": 0,
        "server": ["InvalidName", 400, "queue_name_invalid"],
        "lenient": [false, "lost", false, false],
        "strict": ["LeaseLost", true],
        "held": [true, true, true],
        "outcomes": {"completed": 30, "retry": 12},
        "all": true,
    });
    for (key, value) in want.as_object().unwrap() {
        assert_eq!(&out[key], value, "{key}: {out}");
    }
    let want_runs: Vec<i64> = (0..30).map(|i| if i % 5 < 2 { 2 } else { 1 }).collect();
    assert_eq!(out["runs"], json!(want_runs), "{out}");
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
    let rows = rows(&db, "drain");
    assert_eq!(rows.len(), 30);
    for row in rows.values() {
        assert_eq!(row.state, "completed", "job {} not completed", row.i);
        assert_eq!(
            row.attempt,
            if row.i % 5 < 2 { 2 } else { 1 },
            "job {} attempts",
            row.i
        );
    }
    drop(server);
}

/// Transactional completion: the application's row and the job's completion commit together.
/// `Client.transaction` writes a receipt and completes a job in one commit; with a stale token
/// the completion changes no row, so `LeaseLost` is thrown and the receipt rolled back; a call
/// made outside the transaction's body waits for it instead of joining it. A `Worker` with
/// `transactional: true` hands each handler the transaction: a handler that throws leaves no
/// receipt and its job is retried; a lease lost before the completion (released by another
/// connection; on SQLite, whose one writer is this transaction, inside it) rolls the receipt
/// back and is heard as `lost`; in the end each job has exactly one receipt, written by the
/// attempt that completed it.
fn transactional(engine: Engine) {
    let db = TestDb::new(engine);
    let q = "tx";
    db.sql("CREATE TABLE app_receipt (job BIGINT NOT NULL, attempt INT NOT NULL)");
    db.ok(&[
        "queue",
        "set",
        q,
        "--lease",
        "1s",
        "--backoff-base",
        "20ms",
        "--backoff-max",
        "40ms",
    ]);
    let out = ts_eval(
        r#"const [url, q] = args;
const c = await b.Client.connect(url);
const other = await b.Client.connect(url);
const [m1, m2] = c.flavor === "postgres" ? ["$1", "$2"] : c.flavor === "sqlite" ? ["?1", "?2"] : ["?", "?"];
const receipt = `INSERT INTO app_receipt (job, attempt) VALUES (${m1}, ${m2})`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const seen = {};
await c.enqueueMany([0, 1].map((i) => ({ queue: "one", payload: { i } })));
const [first, second] = await c.claim("one", 2);
seen.first = first.id;
seen.second = second.id;
seen.completed = await c.transaction(async (db) => {
  await db.run(receipt, [first.id, first.attempt]);
  return c.complete(first);
});
try {
  await c.transaction(async (db) => {
    await db.run(receipt, [second.id, second.attempt]);
    await c.complete({ ...second, token: second.token + 1n });
  });
  seen.stale = "no error";
} catch (err) { seen.stale = [err.constructor.name, err.jobId === second.id]; }
const side = new Promise((resolve) => setTimeout(() => resolve(c.enqueue("side", { outside: true })), 10));
try {
  await c.transaction(async (db) => {
    await db.run(receipt, [-1, 1]);
    await sleep(100);
    throw new Error("rolled back");
  });
} catch (err) { seen.rolledBack = err.message; }
seen.side = await side;

seen.ids = await c.enqueueMany(Array.from({ length: 12 }, (_, i) => ({ queue: q, payload: { i } })));
const outcomes = {};
let runs = 0;
let stolen = false;
await new b.Worker(url, q, async (job, db) => {
  runs++;
  await db.run(receipt, [job.id, job.attempt]);
  await sleep(10);
  if (job.payload.i === 3 && job.attempt === 1) throw new Error("fails once on purpose");
  if (job.payload.i === 5 && !stolen) {
    stolen = true;
    if (db.flavor === "sqlite") seen.released = (await db.run(b.statement("sqlite", "job_release"), [0, job.id, job.token])).affected === 1;
    else seen.released = await other.release(job);
  }
}, { transactional: true, concurrency: 4, batch: 4, signals: false,
     onOutcome: (job, o) => (outcomes[o] = (outcomes[o] ?? 0) + 1) }).run({ drain: true });
seen.outcomes = outcomes;
seen.runs = runs;
try {
  new b.HttpWorker(new b.HttpClient("http://127.0.0.1:9", "not-a-real-token-0123"), q, () => undefined, { transactional: true });
  seen.http = "no error";
} catch (err) { seen.http = err.constructor.name; }
await Promise.all([c.close(), other.close()]);
print(seen)"#,
        &[&db.url, q],
    );
    let want = json!({
        "completed": true,
        "stale": ["LeaseLost", true],
        "rolledBack": "rolled back",
        "released": true,
        "outcomes": {"completed": 12, "retry": 1, "lost": 1},
        "runs": 14,
        "http": "InvalidOption",
    });
    for (key, value) in want.as_object().unwrap() {
        assert_eq!(&out[key], value, "{key}: {out}");
    }
    let receipts = |job: &Value| {
        count(
            &db,
            &format!("SELECT COUNT(*) FROM app_receipt WHERE job = {job}"),
        )
    };
    let in_state = |job: &Value, state: &str| {
        count(
            &db,
            &format!("SELECT COUNT(*) FROM backlog_job_all WHERE id = {job} AND state = '{state}'"),
        )
    };

    // Client.transaction: completed with its receipt; the stale token left neither.
    assert_eq!(receipts(&out["first"]), 1);
    assert_eq!(in_state(&out["first"], "completed"), 1);
    assert_eq!(
        receipts(&out["second"]),
        0,
        "the stale completion kept its receipt"
    );
    assert_eq!(
        in_state(&out["second"], "running"),
        1,
        "the stale completion changed the job"
    );
    // The call from outside ran after the rollback, not inside the transaction.
    assert_eq!(receipts(&json!(-1)), 0);
    assert!(out["side"].is_i64(), "{out}");
    assert_eq!(in_state(&out["side"], "available"), 1, "{out}");

    // The worker: one receipt per job, by the attempt that completed it.
    assert_eq!(db.stats()[q]["completed"], 12, "{}", db.stats());
    let joined = format!(
        "FROM app_receipt r JOIN backlog_job_all j ON j.id = r.job WHERE j.queue = '{q}' \
         AND j.state = 'completed'"
    );
    assert_eq!(count(&db, &format!("SELECT COUNT(*) {joined}")), 12);
    assert_eq!(
        count(&db, &format!("SELECT COUNT(DISTINCT r.job) {joined}")),
        12
    );
    assert_eq!(
        count(
            &db,
            &format!("SELECT COUNT(*) {joined} AND r.attempt = j.attempt")
        ),
        12,
        "a receipt of an attempt that did not complete its job"
    );
    let failed_once = &out["ids"][3];
    assert_eq!(
        db.sql(&format!(
            "SELECT attempt FROM app_receipt WHERE job = {failed_once}"
        ))
        .trim(),
        "2",
        "the failed attempt's receipt was not rolled back"
    );
    assert_eq!(receipts(&out["ids"][5]), 1);
}

on_every_backend! {
    typescript_contract => contract,
    typescript_producer => producer,
    typescript_errors => errors,
    typescript_pause_order_and_stop => pause_order_and_stop,
    typescript_http => http,
    typescript_transactional => transactional,
}
