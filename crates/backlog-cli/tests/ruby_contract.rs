//! The SQL contract (docs/sql.md) driven from Ruby: the gem of `clients/ruby` (built and
//! installed with `gem build` and `gem install --local` once, and run from its source tree)
//! enqueues with the catalog's multi-row INSERT and works queues with the catalog's claim,
//! complete, fail, heartbeat, release and rescue statements, beside `backlog work` on the same
//! queue, on SQLite, PostgreSQL and MariaDB; its producer writes on the application's own
//! connection (pg, mysql2, sqlite3) inside the application's transaction and refuses bad input
//! with typed errors before writing anything; over HTTP it enqueues and works a queue through
//! `backlog serve` with a token; and Active Job runs on it. Ruby and its drivers (ruby-pg,
//! ruby-mysql2, ruby-sqlite3, ruby-activejob, which `scripts/services.sh` installs) are
//! required: a missing one fails the tests.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::client_contract::*;
use common::languages::{rb_worker, ruby};
use common::{Engine, TestDb};
use serde_json::{Value, json};

/// The gem's source tree, as `gem install` would install it.
const GEM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/ruby");
const QUERIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../backlog-sql/queries");
const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// What every snippet has: the gem, `args`, `out(value)` (prints it as JSON), `app_conn(url)`
/// (the application's own connection, with the driver an application would use) and
/// `app_exec(conn, sql)`, `app_tx(conn) { }` (a transaction on it, rolled back when the block
/// raises).
const PRELUDE: &str = r#"
require "json"
require "uri"
require "backlog"
require "backlog/http"
args = ARGV
def out(v) = puts(JSON.generate(v))
def app_conn(url)
  case url
  when %r{\Asqlite://} then require "sqlite3"; SQLite3::Database.new(url.delete_prefix("sqlite://"))
  when /\Apostgres/ then require "pg"; PG.connect(url)
  else
    require "mysql2"
    u = URI.parse(url)
    Mysql2::Client.new(host: u.host, port: u.port, username: u.user, database: u.path[1..])
  end
end
def app_exec(conn, sql)
  case conn.class.name
  when "PG::Connection" then conn.exec(sql)
  when "Mysql2::Client" then conn.query(sql)
  else conn.execute(sql)
  end
end
def app_tx(conn)
  app_exec(conn, "BEGIN")
  begin
    yield
  rescue Exception
    app_exec(conn, "ROLLBACK")
    raise
  end
  app_exec(conn, "COMMIT")
end
def error_of
  yield
  "no error"
rescue Backlog::Error => e
  e.class.name.split("::").last
end
"#;

/// Runs a Ruby snippet after the prelude; returns what it printed, as JSON.
fn rb_eval(code: &str, args: &[&str]) -> Value {
    let mut cmd = ruby();
    cmd.arg("-e").arg(format!("{PRELUDE}\n{code}")).args(args);
    let out = stdout_within(cmd, Duration::from_secs(45));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// clients/ruby/examples/worker.rb, logging `run I ID ATTEMPT` and `OUTCOME I ID`.
#[test]
fn ruby_and_its_drivers_are_installed() {
    let v = rb_eval(
        r#"require "pg"; require "mysql2"; require "sqlite3"; require "active_job"
out([PG::VERSION, Mysql2::VERSION, SQLite3::VERSION, ActiveJob::VERSION::STRING])"#,
        &[],
    );
    assert_eq!(v.as_array().map(Vec::len), Some(4), "{v}");
}

/// `gem build` and `gem install --local` from the repository path, with no registry: the
/// installed gem loads, and its version follows the schema version `backlog migrate` applies.
#[test]
fn ruby_gem_builds_installs_and_follows_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let gem = dir.path().join("backlog.gem");
    let mut build = Command::new("gem");
    build
        .current_dir(GEM)
        .args(["build", "backlog.gemspec", "-o"])
        .arg(&gem);
    stdout_within(build, Duration::from_secs(60));
    let home = dir.path().join("home");
    let mut install = Command::new("gem");
    install
        .args(["install", "--local", "--no-document", "--install-dir"])
        .arg(&home)
        .arg(&gem);
    stdout_within(install, Duration::from_secs(60));
    let mut load = Command::new("ruby");
    load.env("GEM_PATH", &home).args([
        "-e",
        r#"gem "backlog"; require "backlog"; puts Backlog::VERSION, Backlog::SCHEMA_VERSION, $LOADED_FEATURES.grep(/backlog\/client\.rb/)"#,
    ]);
    let out = stdout_within(load, Duration::from_secs(30));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[2].starts_with(&*home.to_string_lossy()), "{out}");
    let db = TestDb::new(Engine::Sqlite);
    let migrated = db.ok(&["migrate"]);
    let schema = lines[1];
    assert!(
        migrated.contains(&format!("schema is at version {schema} ")),
        "the gem speaks schema {schema}; backlog migrate says {migrated}"
    );
    assert_eq!(lines[0], format!("0.{schema}.0"), "{out}");
}

/// The statements the gem carries must be the library's files, byte for byte.
#[test]
fn ruby_copies_equal_the_query_files() {
    let copies = Path::new(GEM).join("lib/backlog/sql");
    let mut n = 0;
    for dialect in ["sqlite", "postgres", "mysql"] {
        for entry in std::fs::read_dir(copies.join(dialect)).unwrap() {
            let copy = entry.unwrap().path();
            let file = Path::new(QUERIES)
                .join(dialect)
                .join(copy.file_name().unwrap());
            let want = std::fs::read(&file).unwrap_or_else(|e| {
                panic!("{}: {} unreadable: {e}", copy.display(), file.display())
            });
            assert!(
                std::fs::read(&copy).unwrap() == want,
                "{} differs from {}: run `ruby clients/ruby/script/queries.rb`",
                copy.display(),
                file.display()
            );
            n += 1;
        }
    }
    assert!(n >= 50, "only {n} statements copied");
}

/// 600 jobs (400 from the gem's multi-row INSERT, 200 from `backlog enqueue --jsonl`), every
/// tenth failing its first attempt, worked at once by two Ruby workers and a `backlog work`.
/// One Ruby worker freezes holding a job and is killed with SIGKILL; its job is rescued and
/// completed by another worker. Every job ends completed, each acked once (by the process its
/// row names), and the dead worker's stale token is refused by every fenced statement.
fn contract(engine: Engine) {
    let deadline = Instant::now() + Duration::from_secs(50);
    let db = TestDb::new(engine);
    let (q, n, from_ruby) = ("contract", 600_i64, 400_i64);
    let quick = ["--backoff-base", "100ms", "--backoff-max", "200ms"];
    db.ok(&[&["queue", "set", q, "--lease", "2s"][..], &quick].concat());
    write_jsonl(&db.path("cli.jsonl"), from_ruby..n);
    let ids = rb_eval(
        r#"jobs = (0...Integer(args[2])).map { |i| { queue: args[1], payload: i % 10 == 3 ? { "i" => i, "fail_once" => true } : { "i" => i } } }
conn = app_conn(args[0])
ids = nil
app_tx(conn) { ids = Backlog.enqueue_many(conn, jobs) }
out(ids)"#,
        &[&db.url, q, &from_ruby.to_string()],
    );
    let ids: Vec<i64> = serde_json::from_value(ids).unwrap();
    assert_eq!(ids.len() as i64, from_ruby);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids out of order");
    db.ok(&["enqueue", q, "--jsonl", "cli.jsonl"]);
    assert_eq!(db.stats()[q]["available"], n, "{}", db.stats());

    let stall = db.path("stall.json");
    let mut victim = rb_worker(
        &db,
        q,
        "rb-a",
        &[
            "--stall-after",
            "20",
            "--stall-file",
            stall.to_str().unwrap(),
        ],
    );
    let others = [
        rb_worker(&db, q, "rb-b", &["--concurrency", "2"]),
        backlog_worker(&db, q, "rust-a"),
    ];
    while !stall.exists() {
        if let Some(status) = victim.child.try_wait().unwrap() {
            panic!(
                "rb-a exited ({status}) before stalling: {}",
                victim.stderr()
            );
        }
        assert!(Instant::now() < deadline, "rb-a never stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
    let frozen: Value = serde_json::from_str(&std::fs::read_to_string(&stall).unwrap()).unwrap();
    victim.child.kill().unwrap(); // SIGKILL
    victim.child.wait().unwrap();
    for p in others {
        p.finish(deadline);
    }

    let stats = db.stats();
    assert_eq!(stats[q]["completed"], n, "{stats}");
    let rows = rows(&db, q);
    assert_eq!(rows.len() as i64, n);
    assert!(rows.values().all(|r| r.state == "completed"));
    assert_eq!(
        rows.values().map(|r| r.i).collect::<BTreeSet<_>>(),
        (0..n).collect(),
        "payloads lost or doubled"
    );

    // Acked exactly once: each Ruby completion is the completion of record (the row names that
    // worker), no job was acked twice, and the others ran in `backlog work` at their attempt.
    let logs = ["rb-a", "rb-b", "rust-a"];
    let all: BTreeMap<&str, Vec<Event>> = logs.iter().map(|&l| (l, events(&db, l))).collect();
    let mut acked_by: BTreeMap<i64, &str> = BTreeMap::new();
    for name in ["rb-a", "rb-b"] {
        for e in all[name].iter().filter(|e| e.what == "completed") {
            assert!(
                acked_by.insert(e.id, name).is_none(),
                "job {} acked twice",
                e.id
            );
            assert_eq!(
                rows[&e.id].owner, name,
                "{name}'s ack of job {} was not kept",
                e.id
            );
        }
    }
    let rust_runs: BTreeSet<(i64, i64)> = all["rust-a"]
        .iter()
        .filter(|e| e.what == "run")
        .map(|e| (e.id, e.attempt.unwrap()))
        .collect();
    let (mut ruby_made_by_backlog, mut backlog_made_by_ruby) = (0, 0);
    for (id, row) in &rows {
        if acked_by.contains_key(id) {
            backlog_made_by_ruby += usize::from(row.i >= from_ruby);
            continue;
        }
        assert!(
            rust_runs.contains(&(*id, row.attempt)),
            "job {id} completed by {} without its attempt {} running there",
            row.owner,
            row.attempt
        );
        ruby_made_by_backlog += usize::from(row.i < from_ruby);
    }
    assert!(
        ruby_made_by_backlog > 0 && backlog_made_by_ruby > 0,
        "not shared: {ruby_made_by_backlog} Ruby-enqueued jobs worked by backlog, \
         {backlog_made_by_ruby} backlog-enqueued by Ruby"
    );
    for (id, row) in rows.iter().filter(|(_, r)| r.fail_once) {
        assert!(row.attempt >= 2, "job {id} failing once ended at attempt 1");
    }

    // The frozen job: rescued from the killed worker and completed by another.
    let frozen_id = frozen["id"].as_i64().unwrap();
    assert_ne!(
        rows[&frozen_id].owner, "rb-a",
        "the killed worker's job was not rescued"
    );
    let errors = db.sql(&format!(
        "SELECT errors FROM backlog_job_all WHERE id = {frozen_id}"
    ));
    assert!(
        errors.contains("lease expired (worker rb-a stopped heartbeating)"),
        "{errors}"
    );

    // Its token is stale: every fenced statement reports the lease lost; the row is unchanged.
    let row_now = || {
        db.sql(&format!(
            "SELECT state, attempt, errors FROM backlog_job_all WHERE id = {frozen_id}"
        ))
    };
    let before = row_now();
    let out = rb_eval(
        r#"c = Backlog::Client.new(args[0])
job = -> { Backlog::Job.new(id: Integer(args[1]), queue: args[2], attempt: 1, token: Integer(args[3])) }
strict = %i[complete heartbeat release cancel].map { |op| error_of { c.public_send(op, job.call, strict: true) } }
out([c.complete(job.call), c.fail(job.call, "stale"), c.heartbeat(job.call), c.release(job.call),
     c.cancel(job.call), error_of { c.fail(job.call, "stale", strict: true) }, *strict])"#,
        &[
            &db.url,
            &frozen_id.to_string(),
            q,
            &frozen["token"].to_string(),
        ],
    );
    let lost = "LeaseLost";
    assert_eq!(
        out,
        json!([
            false, "lost", false, false, false, lost, lost, lost, lost, lost
        ])
    );
    assert_eq!(row_now(), before);
}

/// Every option of the producer on the application's own connection, read back by `backlog job
/// show`; a taken unique key (also twice in one batch) returns the job holding it;
/// `enqueue_many` keeps the order; a rolled-back transaction leaves no job, a committed one its
/// job and the application's row.
fn producer(engine: Engine) {
    let db = TestDb::new(engine);
    db.sql("CREATE TABLE app_order (id INT PRIMARY KEY)");
    let out = rb_eval(
        r#"conn = app_conn(args[0])
seen = { "before" => Backlog::Session.local_us }
seen["first"] = Backlog.enqueue(conn, "mail", { "to" => "a@example.com", "n" => 1 }, priority: -7, delay: 3600,
                                max_attempts: 4, unique_key: "welcome:42", kind: "welcome", group: "acct-42",
                                trace_context: { traceparent: args[1], tracestate: "vendor=x" })
seen["again"] = Backlog.enqueue(conn, "mail", { "other" => true }, unique_key: "welcome:42")
seen["at"] = Backlog.enqueue(conn, "mail", [1, 2], run_at: 1_700_000_000_000_000, trace_context: args[1])
seen["many"] = Backlog.enqueue_many(conn, (0...5).map { |i| { queue: "bulk", payload: i, priority: i } })
seen["keys"] = Backlog.enqueue_many(conn, [{ queue: "uq", payload: 1, unique_key: "k" }, { queue: "uq", payload: 2 },
                                           { queue: "uq", payload: 3, unique_key: "k" }, { queue: "uq", payload: 4, unique_key: "j" }])
seen["after"] = Backlog::Session.local_us
begin
  app_tx(conn) do
    app_exec(conn, "INSERT INTO app_order (id) VALUES (1)")
    Backlog.enqueue(conn, "tx", { "order" => 1 })
    raise "the request failed"
  end
rescue RuntimeError
end
app_tx(conn) do
  app_exec(conn, "INSERT INTO app_order (id) VALUES (2)")
  seen["committed"] = Backlog.enqueue(conn, "tx", { "order" => 2 })
end
out(seen)"#,
        &[&db.url, TP],
    );
    let job = every_option_kept(&db, &out, TP);
    let run_at = job["run_at"].as_i64().unwrap();
    let (before, after) = (
        out["before"].as_i64().unwrap(),
        out["after"].as_i64().unwrap(),
    );
    let hour = 3_600_000_000_i64;
    assert!(
        run_at >= before + hour - 5_000_000 && run_at <= after + hour + 5_000_000,
        "delay 3600: run_at {run_at} not an hour after {before}..{after}"
    );
    let at = job_show(&db, &out["at"]);
    assert_eq!(at["run_at"], 1_700_000_000_000_000_i64);
    assert_eq!(
        (
            &at["payload"],
            &at["state"],
            &at["traceparent"],
            &at["tracestate"]
        ),
        (
            &json!([1, 2]),
            &json!("available"),
            &json!(TP),
            &Value::Null
        )
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
    let keys: Vec<i64> = serde_json::from_value(out["keys"].clone()).unwrap();
    assert_eq!(
        keys[0], keys[2],
        "a key twice in a batch made two jobs: {keys:?}"
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM backlog_job WHERE queue = 'uq'"),
        3
    );
    assert_eq!(job_show(&db, &json!(keys[0]))["payload"], 1);
    // The rolled-back request left nothing; the committed one its row and its job.
    assert_eq!(db.sql("SELECT id FROM app_order").trim(), "2");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM backlog_job WHERE queue = 'tx'"),
        1
    );
    assert_eq!(
        job_show(&db, &out["committed"])["payload"],
        json!({"order": 2})
    );
}

/// Bad input is a typed error and writes nothing; a database without the schema is
/// SchemaMissing (an SQLite file is not created), an older schema SchemaTooOld.
fn errors(engine: Engine) {
    let db = TestDb::new(engine);
    let out = rb_eval(
        r#"conn = app_conn(args[0])
c = Backlog::Client.new(args[0])
seen = {}
bad = {
  "nan" => ["q", { "f" => Float::NAN }, {}], "object" => ["q", Object.new, {}],
  "nul" => ["q", { "s" => "a\u0000b" }, {}], "binary" => ["q", "\xff".b, {}],
  "queue" => ["bad queue", {}, {}], "kind" => ["q", {}, { kind: "no/slash" }],
  "unique" => ["q", {}, { unique_key: "k" * 256 }], "group" => ["q", {}, { group: "" }],
  "priority" => ["q", {}, { priority: 32_768 }], "max_attempts" => ["q", {}, { max_attempts: 0 }],
  "delay" => ["q", {}, { delay: -1 }], "both" => ["q", {}, { delay: 1, run_at: 1 }],
  "trace" => ["q", {}, { trace_context: "00-#{'0' * 32}-00f067aa0ba902b7-01" }],
  "unknown" => ["q", {}, { colour: "red" }]
}
bad.each do |what, (queue, payload, opts)|
  seen[what] = [error_of { Backlog.enqueue(conn, queue, payload, **opts) }, error_of { c.enqueue(queue, payload, **opts) }]
end
seen["many"] = error_of { Backlog.enqueue_many(conn, [{ queue: "q", payload: 1 }, { queue: "q", payload: 2, kind: "a b" }]) }
seen["worker"] = error_of { Backlog::Worker.new(args[0], "bad queue") { } }
out(seen)"#,
        &[&db.url],
    );
    let both = |e: &str| json!([e, e]);
    let want = json!({
        "nan": both("InvalidPayload"), "object": both("InvalidPayload"), "nul": both("InvalidPayload"),
        "binary": both("InvalidPayload"), "queue": both("InvalidName"), "kind": both("InvalidName"),
        "unique": both("InvalidName"), "group": both("InvalidName"), "priority": both("InvalidOption"),
        "max_attempts": both("InvalidOption"), "delay": both("InvalidOption"),
        "both": both("InvalidOption"), "trace": both("InvalidOption"), "unknown": both("InvalidOption"),
        "many": "InvalidName", "worker": "InvalidName",
    });
    assert_eq!(out, want);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM backlog_job"),
        0,
        "bad input wrote a job"
    );

    // No schema: the client and the producer on the application's connection both say so.
    let bare = TestDb::unmigrated(engine);
    if engine == Engine::Sqlite {
        // The application's file exists (its own tables), without backlog's.
        bare.sql("CREATE TABLE app (id INT)");
    }
    let out = rb_eval(
        r#"conn = app_conn(args[0])
out([error_of { Backlog::Client.new(args[0]) }, error_of { Backlog.enqueue(conn, "q", 1) }])"#,
        &[&bare.url],
    );
    assert_eq!(out, json!(["SchemaMissing", "SchemaMissing"]));
    let gone = TestDb::unmigrated(Engine::Sqlite);
    let out = rb_eval(
        r#"out([error_of { Backlog::Client.new(args[0]) }, File.exist?(args[0].delete_prefix("sqlite://"))])"#,
        &[&gone.url],
    );
    assert_eq!(out, json!(["SchemaMissing", false]));

    // An older schema: the last migration's record taken away.
    db.sql("DELETE FROM backlog_migration WHERE version = (SELECT v FROM (SELECT MAX(version) AS v FROM backlog_migration) AS m)");
    let out = rb_eval(
        r#"begin
  Backlog::Client.new(args[0])
  out("no error")
rescue Backlog::SchemaTooOld => e
  out([e.found, e.needed, error_of { Backlog.enqueue(app_conn(args[0]), "q", 1) }])
end"#,
        &[&db.url],
    );
    let needed = out[1].as_i64().unwrap();
    assert_eq!(out, json!([needed - 1, needed, "SchemaTooOld"]));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM backlog_job"), 0);
}

/// A paused queue hands out nothing, and its jobs run once it resumes, in priority order then
/// FIFO (LIFO for a LIFO queue); a transactional handler's write commits with its completion;
/// SIGTERM lets the job in hand finish, releases the rest of the batch, and exits 0.
fn pause_order_and_stop(engine: Engine) {
    let deadline = Instant::now() + Duration::from_secs(40);
    let db = TestDb::new(engine);
    db.ok(&["queue", "set", "newest", "--order", "lifo"]);
    db.sql("CREATE TABLE app_done (id BIGINT PRIMARY KEY)");
    db.ok(&["queue", "set", "p", "--lease", "30s"]);
    db.ok(&["queue", "pause", "p"]);
    let out = rb_eval(
        r#"c = Backlog::Client.new(args[0])
seen = {}
c.enqueue_many([0, 1, 2].map { |i| { queue: "p", payload: { "i" => i }, priority: i == 2 ? -1 : 0 } })
c.enqueue_many((0...4).map { |i| { queue: "newest", payload: { "i" => i } } })
seen["paused"] = c.claim("p", 10).length
system({ "BACKLOG_DATABASE_URL" => args[0] }, args[1], "queue", "resume", "p", exception: true, out: File::NULL)
seen["resumed"] = c.claim("p", 10).map { |j| j.payload["i"] }
seen["lifo"] = c.claim("newest", 10).map { |j| j.payload["i"] }
ids = c.enqueue_many((0...3).map { |i| { queue: "tx", payload: { "i" => i } } })
w = Backlog::Worker.new(args[0], "tx", transactional: true) do |job, conn|
  app_exec(conn, "INSERT INTO app_done (id) VALUES (#{Integer(job.id)})")
  raise "fails once on purpose" if job.payload["i"] == 1 && job.attempt == 1
end
w.run(drain: true)
seen["tx_ids"] = ids
out(seen)"#,
        &[&db.url, common::BIN],
    );
    assert_eq!(out["paused"], 0, "{out}");
    assert_eq!(out["resumed"], json!([2, 0, 1]), "{out}");
    assert_eq!(out["lifo"], json!([3, 2, 1, 0]), "{out}");
    let tx_ids: Vec<i64> = serde_json::from_value(out["tx_ids"].clone()).unwrap();
    let done: BTreeSet<i64> = db
        .sql("SELECT id FROM app_done")
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(
        done,
        tx_ids.iter().copied().collect(),
        "the failed attempt's write stayed"
    );
    assert_eq!(db.stats()["tx"]["completed"], 3);

    // SIGTERM mid-job.
    db.sql("DELETE FROM backlog_job WHERE queue <> 'tx'");
    rb_eval(
        r#"out(Backlog::Client.new(args[0]).enqueue_many((0...3).map { |i| { queue: "term", payload: { "i" => i } } }))"#,
        &[&db.url],
    );
    let mut term = rb_worker(
        &db,
        "term",
        "rb-term",
        &["--batch", "3", "--work-ms", "1500", "--grace", "10"],
    );
    let log = || std::fs::read_to_string(db.path("rb-term.log")).unwrap_or_default();
    while !log().contains("run ") {
        assert!(
            Instant::now() < deadline,
            "no job started: {}",
            term.stderr()
        );
        assert!(
            term.child.try_wait().unwrap().is_none(),
            "exited: {}",
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
    let lines: Vec<String> = log().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[1].starts_with("completed "), "{lines:?}");
    let stats = db.stats();
    assert_eq!(
        (
            &stats["term"]["completed"],
            &stats["term"]["running"],
            &stats["term"]["available"]
        ),
        (&json!(1), &json!(0), &json!(2)),
        "{stats}"
    );
    let attempts =
        db.sql("SELECT attempt FROM backlog_job WHERE queue = 'term' AND state = 'available'");
    assert!(
        attempts.lines().all(|a| a.trim() == "0"),
        "a released job used an attempt: {attempts}"
    );
}

/// The gem over `backlog serve` with a `produce` token: every enqueue option read back; a
/// taken unique key answers the holder; a wrong token is Unauthorized; bad input is refused
/// before any request; a stale lease token is refused; the server's refusals are typed; an
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
    let out = rb_eval(
        r#"base, secret, tp = args
c = Backlog::HttpClient.new(base, token: secret)
seen = { "before" => Backlog::Session.local_us }
seen["first"] = c.enqueue("mail", { "to" => "a@example.com", "n" => 1 }, priority: -7, delay: 3600, max_attempts: 4,
                          unique_key: "welcome:42", kind: "welcome", group: "acct-42",
                          trace_context: { "traceparent" => tp, "tracestate" => "vendor=x" })
seen["again"] = c.enqueue("mail", { "other" => true }, unique_key: "welcome:42")
seen["many"] = c.enqueue_many((0...5).map { |i| { queue: "bulk", payload: i, priority: i } })
wrong = Backlog::HttpClient.new(base, token: "not-the-secret-0123456789")
seen["wrong"] = [error_of { wrong.enqueue("wrong", 1) }, error_of { wrong.claim("wrong", 1) }]
sent = c.requests
seen["bad"] = [error_of { c.enqueue("q", { "f" => Float::NAN }) }, error_of { c.enqueue("bad queue", 1) },
               error_of { c.enqueue("q", 1, priority: 40_000) }, error_of { c.claim("q", 0) },
               error_of { c.enqueue_many([{ queue: "q", payload: 1 }, { queue: "q", payload: 2, kind: "a b" }]) }]
seen["sent"] = c.requests - sent
begin
  c.request("POST", "/api/v1/jobs", { "queue" => "bad queue", "payload" => 1 })
rescue Backlog::Error => e
  seen["server"] = [e.class.name, e.cause.class.name, e.cause.status, e.cause.code]
end
c.enqueue("ok", 1)
job = c.claim("ok", 1, lease: 30)[0]
stale = job.dup.tap { |j| j.token += 1 }
seen["stale"] = [c.complete(stale.dup), c.fail(stale.dup, "x"), c.heartbeat(stale.dup), c.progress(stale.dup, 1),
                 error_of { c.complete(stale.dup, strict: true) }]
seen["held"] = [c.heartbeat(job, lease: 30), c.progress(job, { "pct" => 50 }), c.complete(job)]
ids = c.enqueue_many((0...20).map { |i| { queue: "drain", payload: { "i" => i } } })
runs = Hash.new(0)
outcomes = Hash.new(0)
lock = Mutex.new
w = Backlog::HttpWorker.new(c, "drain", batch: 4, lease: 5, concurrency: 2,
                            on_outcome: ->(_j, o) { lock.synchronize { outcomes[o] += 1 } }) do |j|
  i = j.payload["i"]
  lock.synchronize { runs[i] += 1 }
  raise "fails once on purpose" if j.attempt == 1 && i % 5 == 0
  raise Backlog::Retry.new("later", delay_s: 0.05) if j.attempt == 1 && i % 5 == 1
end
w.run(drain: true)
seen["runs"] = (0...20).map { |i| runs[i] }
seen["outcomes"] = outcomes.transform_keys(&:to_s)
out(seen)"#,
        &[&server.base, &secret, TP],
    );
    let job = every_option_kept(&db, &out, TP);
    let run_at = job["run_at"].as_i64().unwrap();
    let before = out["before"].as_i64().unwrap();
    assert!(
        (run_at - before - 3_600_000_000).abs() < 10_000_000,
        "delay 3600: run_at {run_at}, enqueued at {before}"
    );
    let many: Vec<i64> = serde_json::from_value(out["many"].clone()).unwrap();
    for (i, id) in many.iter().enumerate() {
        assert_eq!(job_show(&db, &json!(id))["priority"], i);
    }
    let want = json!({
        "wrong": ["Unauthorized", "Unauthorized"],
        "bad": ["InvalidPayload", "InvalidName", "InvalidOption", "InvalidOption", "InvalidName"],
        "sent": 0,
        "server": ["Backlog::InvalidName", "Backlog::HttpError", 400, "queue_name_invalid"],
        "stale": [false, "lost", false, false, "LeaseLost"],
        "held": [true, true, true],
        "runs": (0..20).map(|i| if i % 5 < 2 { 2 } else { 1 }).collect::<Vec<_>>(),
        "outcomes": {"completed": 20, "retry": 8},
    });
    for (key, value) in want.as_object().unwrap() {
        assert_eq!(&out[key], value, "{key}: {out}");
    }
    for queue in ["wrong", "q"] {
        let n = count(
            &db,
            &format!("SELECT COUNT(*) FROM backlog_job_all WHERE queue = '{queue}'"),
        );
        assert_eq!(n, 0, "a refused request wrote a job in {queue}");
    }
    assert_eq!(db.stats()["drain"]["completed"], 20, "{}", db.stats());
    drop(server);
}

/// Active Job on backlog, with Active Job itself: `perform_later` is a backlog job (queue, kind,
/// payload, priority, the class's max attempts), `set(wait:)` delays it, `set(priority:)` runs
/// it first, `retry_on` re-enqueues, an unhandled error is backlog's retry, and
/// ActiveJobRunner performs them all; an adapter on the application's connection enqueues in
/// its transaction.
fn active_job(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&[
        "queue",
        "set",
        "aj",
        "--backoff-base",
        "10ms",
        "--backoff-max",
        "20ms",
    ]);
    let out = rb_eval(
        r#"require "backlog/active_job"
require "logger"
ActiveJob::Base.logger = Logger.new(nil)
ActiveJob::Base.queue_adapter = ActiveJob::QueueAdapters::BacklogAdapter.new(url: args[0])
$ran = []
class GreetJob < ActiveJob::Base
  queue_as :aj
  self.backlog_max_attempts = 3
  def perform(name, at) = $ran << [name, executions, ((Time.now.to_f - at) * 1000).round]
end
class FlakyJob < ActiveJob::Base
  queue_as :aj
  retry_on ArgumentError, wait: 0, attempts: 3
  def perform
    raise ArgumentError, "handled by retry_on" if executions == 1
    raise "left to backlog" if executions == 2
    $ran << ["flaky", executions, 0]
  end
end
seen = {}
t = Time.now.to_f
seen["plain"] = GreetJob.perform_later("plain", t).provider_job_id
seen["later"] = GreetJob.set(wait: 1.5).perform_later("later", t).provider_job_id
seen["first"] = GreetJob.set(priority: -5).perform_later("first", t).provider_job_id
FlakyJob.perform_later
conn = app_conn(args[0])
ActiveJob::Base.queue_adapter = ActiveJob::QueueAdapters::BacklogAdapter.new(connection: -> { conn })
begin
  app_tx(conn) { GreetJob.perform_later("rolled back", t); raise "the request failed" }
rescue RuntimeError
end
app_tx(conn) { GreetJob.perform_later("committed", t) }
Backlog::ActiveJobRunner.new(args[0], ["aj"], batch: 10).run(drain: true)
seen["ran"] = $ran
out(seen)"#,
        &[&db.url],
    );
    let ran = out["ran"].as_array().unwrap();
    let names: Vec<&str> = ran.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(
        names[0], "first",
        "the priority -5 job did not run first: {out}"
    );
    assert_eq!(
        names.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["first", "plain", "later", "committed", "flaky"]),
        "{out}"
    );
    assert_eq!(names.len(), 5, "{out}");
    let later = ran.iter().find(|r| r[0] == "later").unwrap();
    assert!(
        later[2].as_i64().unwrap() >= 1500,
        "set(wait: 1.5) ran early: {later}"
    );
    let flaky = ran.iter().find(|r| r[0] == "flaky").unwrap();
    assert_eq!(
        flaky[1], 3,
        "executions count retry_on's and backlog's attempts: {out}"
    );

    let plain = job_show(&db, &out["plain"]);
    assert_eq!(
        (&plain["queue"], &plain["kind"]),
        (&json!("aj"), &json!("GreetJob"))
    );
    assert_eq!(plain["max_attempts"], 3);
    assert_eq!(plain["payload"]["job_class"], "GreetJob");
    assert_eq!(plain["payload"]["arguments"][0], "plain");
    assert_eq!(job_show(&db, &out["first"])["priority"], -5);
    // The flaky job: one retry_on re-enqueue (a second backlog job), whose first attempt
    // failed and was retried by backlog.
    let flaky_rows =
        db.sql("SELECT attempt FROM backlog_job_all WHERE kind = 'FlakyJob' ORDER BY id");
    assert_eq!(
        flaky_rows.split_whitespace().collect::<Vec<_>>(),
        ["1", "2"]
    );
    assert_eq!(db.stats()["aj"]["completed"], 6, "{}", db.stats());
}

on_every_backend! {
    ruby_contract => contract,
    ruby_producer => producer,
    ruby_errors => errors,
    ruby_pause_order_and_stop => pause_order_and_stop,
    ruby_http => http,
    ruby_active_job => active_job,
}
