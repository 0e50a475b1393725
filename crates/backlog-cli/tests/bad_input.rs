//! Bad input gets a clear message on stderr, a non-zero exit, and changes nothing.

mod common;

use common::{Engine, TestDb};

fn total_jobs(db: &TestDb) -> i64 {
    db.sql("SELECT COUNT(*) FROM backlog_job_all")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let db = TestDb::new(Engine::Sqlite);
    let long = "q".repeat(129);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["enqueue", "q", "{not json"], "invalid JSON payload"),
        (vec!["enqueue", "q", ""], "invalid JSON payload"),
        (vec!["enqueue", "q", "{} {}"], "invalid JSON payload"),
        (
            vec![
                "--payload-limit",
                "10",
                "enqueue",
                "q",
                r#"{"a":"0123456789"}"#,
            ],
            "over the limit of 10 bytes",
        ),
        (vec!["enqueue", "", "{}"], "must not be empty"),
        (vec!["enqueue", &long, "{}"], "at most 128"),
        (
            vec!["enqueue", "q'; DROP TABLE backlog_job; --", "{}"],
            "invalid queue name",
        ),
        (
            vec!["enqueue", "q", "{}", "--kind", "a b"],
            "invalid job kind",
        ),
        (
            vec!["enqueue", "q", "{}", "--unique-key", ""],
            "invalid unique key",
        ),
        (vec!["enqueue", "q"], "a payload is required"),
        (vec!["enqueue", "q", "{}", "--delay", "5"], "missing unit"),
        (
            vec!["enqueue", "q", "{}", "--delay", "soon"],
            "invalid duration",
        ),
        (vec!["enqueue", "q", "{}", "--priority", "99999"], "99999"),
        (
            vec!["enqueue", "q", "{}", "--max-attempts", "0"],
            "0 is not in 1..=10000",
        ),
        (
            vec!["enqueue", "q", "{}", "--max-attempts=-3"],
            "-3 is not in 1..=10000",
        ),
        (
            vec!["job", "list", "q", "--state", "done"],
            "unknown state \"done\"",
        ),
        (vec!["job", "show", "424242"], "no job with id 424242"),
        (vec!["job", "show", "abc"], "invalid value 'abc'"),
        (
            vec!["--max-connections", "0", "stats"],
            "0 is not in 1..=1000",
        ),
        (
            vec![
                "--database-url",
                "sqlite://x.db?pooler=transaction",
                "stats",
            ],
            "settings of PostgreSQL URLs",
        ),
        (
            vec![
                "--database-url",
                "postgres://u@127.0.0.1:1/db?pooler=session",
                "stats",
            ],
            "expected pooler=transaction",
        ),
        (
            vec!["queue", "set", "q", "--order", "random"],
            "invalid order \"random\"",
        ),
        (
            vec!["queue", "set", "q", "--retention", "forever"],
            "invalid retention",
        ),
        (
            vec!["queue", "set", "q", "--lease", "0s"],
            "lease must be longer than zero",
        ),
        (
            vec![
                "queue",
                "set",
                "q",
                "--backoff-base",
                "10m",
                "--backoff-max",
                "1m",
            ],
            "base 10m > max 1m",
        ),
        (
            vec!["queue", "set", "q", "--concurrency", "0"],
            "0 is not in 1..=10000",
        ),
        (
            vec!["queue", "set", "q", "--global-concurrency", "0"],
            "expected a number from 1 to 1000000, or none",
        ),
        (
            vec!["queue", "set", "q", "--group-concurrency", "0"],
            "0 is not in 1..=10000",
        ),
        (
            vec!["queue", "set", "q", "--group-on-failure", "skip"],
            "invalid group failure rule",
        ),
        (
            vec!["queue", "set", "q", "--rate-limit", "0/1s"],
            "invalid rate limit",
        ),
        (
            vec!["queue", "set", "q", "--rate-limit", "5/soon"],
            "invalid rate limit",
        ),
        (
            vec!["enqueue", "q", "{}", "--group", ""],
            "invalid group key: must not be empty",
        ),
        (vec!["queue", "pause", "bad/name"], "invalid queue name"),
        // A queue with neither settings nor jobs (a typo) is not created by an action on it.
        (vec!["queue", "pause", "nope"], "no such queue: nope"),
        (vec!["queue", "resume", "nope"], "no such queue: nope"),
        (vec!["dead", "redrive", "nope"], "no such queue: nope"),
        (
            vec!["work", "q", "--concurrency", "0", "--", "true"],
            "0 is not in 1..=1000",
        ),
        (
            vec!["work", "q", "--lease", "1x", "--", "true"],
            "invalid duration",
        ),
        (vec!["work", "q w", "--", "true"], "invalid queue name"),
        (vec!["work", "q"], "required"),
        (vec!["stats", "a;b"], "invalid queue name"),
        (vec!["dead", "redrive", "q", "--limit", "0"], "0 is not in"),
        (
            vec!["--database-url", "oracle://x", "stats"],
            "expected sqlite://PATH, postgres://… or mysql://…",
        ),
        (
            vec!["--database-url", "nonsense", "stats"],
            "invalid database URL",
        ),
        (
            vec![
                "--database-url",
                "postgres://postgres@127.0.0.1:1/test",
                "stats",
            ],
            "cannot connect",
        ),
        (
            vec!["--database-url", "mysql://root@127.0.0.1:1/test", "stats"],
            "cannot connect",
        ),
        (
            vec!["--database-url", "postgres://u@host:notaport/db", "stats"],
            "invalid database URL",
        ),
        (
            vec!["--database-url", "postgres://u:secret@host:xx/db", "stats"],
            "postgres://u:***@host:xx/db",
        ),
    ];
    for (args, needle) in &cases {
        db.fails(args, needle);
    }
    assert_eq!(total_jobs(&db), 0, "a refused command changed something");
    assert_eq!(db.sql("SELECT COUNT(*) FROM backlog_queue").trim(), "0");

    // A JSONL file with one bad line enqueues nothing at all.
    std::fs::write(db.path("in.jsonl"), "{\"a\":1}\n{\"b\":\n{\"c\":3}\n").unwrap();
    db.fails(&["enqueue", "q", "--jsonl", "in.jsonl"], "line 2");
    db.fails(
        &["enqueue", "q", "--jsonl", "missing.jsonl"],
        "cannot open missing.jsonl",
    );
    assert_eq!(total_jobs(&db), 0);

    // State conflicts are refused and change nothing.
    let id = db.ok(&["enqueue", "q", "{}"]).trim().to_owned();
    db.fails(&["job", "retry", &id], "cannot retry job");
    db.fails(&["job", "release", &id], "cannot release job");
    assert_eq!(
        db.sql(&format!(
            "SELECT state || ' ' || attempt FROM backlog_job_all WHERE id = {id}"
        ))
        .trim(),
        "available 0"
    );
    // The refusal names the state as `job show` and `job list` report it.
    let later = db
        .ok(&["enqueue", "q", "{}", "--delay", "1h"])
        .trim()
        .to_owned();
    db.fails(
        &["job", "retry", &later],
        &format!("cannot retry job {later}: it is scheduled (run-now makes it due at once)"),
    );
    // Run now, it is due; run now again once held, refused.
    assert!(
        db.ok(&["job", "run-now", &later])
            .contains("is now available")
    );
    db.ok(&["job", "hold", &later]);
    db.fails(
        &["job", "run-now", &later],
        &format!("cannot run now job {later}: it is held"),
    );
    db.fails(
        &["job", "list", "q", "--state", "bogus"],
        "available, scheduled, retrying, waiting, running",
    );

    // Bulk: bad input refused; without --yes only counted; with it, done and audited.
    db.fails(&["job", "bulk", "explode", "q"], "invalid value 'explode'");
    db.fails(
        &["job", "bulk", "hold", "nope", "--yes"],
        "no such queue: nope",
    );
    db.fails(
        &["job", "bulk", "hold", "q", "--state", "bogus", "--yes"],
        "available, scheduled, retrying",
    );
    db.fails(
        &["job", "bulk", "hold", "q", "--older-than", "soon", "--yes"],
        "invalid duration",
    );
    let held = "SELECT COUNT(*) FROM backlog_job WHERE state = 'held'";
    let before = db.sql(held);
    assert!(
        db.ok(&["job", "bulk", "hold", "q", "--state", "available"])
            .contains("1 job(s) of q match; add --yes to hold them")
    );
    assert_eq!(db.sql(held), before, "without --yes nothing changes");
    let out = db.ok(&["job", "bulk", "hold", "q", "--state", "available", "--yes"]);
    assert!(out.contains("hold: 1 of 1 job(s) changed"), "{out}");
    let out = db.ok(&["job", "bulk", "release", "q", "--yes"]);
    assert!(out.contains("release: 2 of 2 job(s) changed"), "{out}");
    let audit = db.ok(&["audit", "--action", "job.bulk"]);
    assert_eq!(audit.matches("job.bulk").count(), 2, "{audit}");

    // Delete: an unknown job and a running one are refused, a held one goes.
    db.fails(&["job", "delete", "424242"], "no job with id 424242");
    db.fails(&["job", "delete", "x"], "invalid value 'x'");
    let out = db.ok(&["job", "delete", &later]);
    assert!(
        out.contains(&format!("job {later} (q, available) deleted")),
        "{out}"
    );
    db.fails(&["job", "show", &later], "no job with id");
    let running = db.ok(&["enqueue", "r", "{}"]).trim().to_owned();
    db.sql(&format!(
        "UPDATE backlog_job SET state = 'running' WHERE id = {running}"
    ));
    db.fails(
        &["job", "delete", &running],
        &format!("cannot delete job {running}: it is running"),
    );
    let n = db.sql("SELECT COUNT(*) FROM backlog_job_all WHERE queue = 'q'");
    let out = db.ok(&["job", "bulk", "delete", "q", "--yes"]);
    let n = n.trim();
    assert!(
        out.contains(&format!("delete: {n} of {n} job(s) changed")),
        "{out}"
    );
    assert_eq!(
        db.sql("SELECT COUNT(*) FROM backlog_job WHERE queue = 'q'")
            .trim(),
        "0"
    );
    let audit = db.ok(&["audit", "--action", "job.delete"]);
    assert_eq!(audit.matches("job.delete").count(), 1, "{audit}");
}

/// A server database's schema is its owner's: without it every command says to migrate, and
/// creates nothing.
#[cfg(feature = "servers")]
fn a_server_without_the_schema_says_to_migrate(engine: Engine) {
    let db = TestDb::unmigrated(engine);
    for args in [
        &["stats"][..],
        &["enqueue", "q", "{}"],
        &["job", "list", "q", "--json"],
        &["work", "q", "--drain", "--", "true"],
    ] {
        db.fails(args, "run `backlog migrate`");
        let url = backlog::redact_url(&db.url);
        db.fails(
            args,
            &format!("to fix it: backlog --database-url '{url}' migrate"),
        );
    }
    let tables = match engine {
        Engine::Postgres => "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()",
        _ => "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
    };
    assert_eq!(
        db.sql(tables).trim(),
        "0",
        "a refused command created tables"
    );
    db.ok(&["migrate"]);
    db.ok(&["enqueue", "q", "{}"]);
    assert_eq!(db.stats()["q"]["available"], 1);
}

#[cfg(feature = "servers")]
#[test]
fn postgres_without_the_schema_says_to_migrate() {
    a_server_without_the_schema_says_to_migrate(Engine::Postgres);
}

#[cfg(feature = "servers")]
#[test]
fn mysql_without_the_schema_says_to_migrate() {
    a_server_without_the_schema_says_to_migrate(Engine::MySql);
}

/// The embedded SQLite database migrates itself on first use: the first command on a fresh
/// path works, says once on stderr what it did, and later commands say nothing.
#[test]
fn sqlite_migrates_itself_on_first_use() {
    let db = TestDb::unmigrated(Engine::Sqlite);
    assert!(!db.path("t.db").exists());
    let out = db.run(&["enqueue", "q", r#"{"a":1}"#]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let id: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(
        err.contains(&format!("migrated {} to schema version", db.url)),
        "{err}"
    );
    let out = db.run(&["job", "show", &id.to_string(), "--json"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["payload"]["a"], 1);
    assert_eq!(
        db.ok(&["migrate"]).trim(),
        format!(
            "schema is at version {} (nothing to do)",
            backlog::SCHEMA_VERSION
        )
    );

    // Any command, on the default database in the working directory too.
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::BIN)
        .args(["stats", "--json"])
        .env_remove("BACKLOG_DATABASE_URL")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "{}");
    assert!(dir.path().join("backlog.db").exists());
}
