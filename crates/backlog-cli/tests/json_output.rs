//! What the read commands print, as scripts read it: `stats` (text and `--json`) and the JSON
//! shape of every `--json` output, on every engine.

mod common;

use std::process::Stdio;

use common::{Engine, TestDb};

/// Jobs of a queue with `archive` retention leave `backlog_job`; `stats` counts them as archived
/// instead of showing zeros.
fn stats_count_archived_jobs(engine: Engine) {
    let db = TestDb::new(engine);
    db.ok(&["queue", "set", "arch", "--retention", "archive"]);
    for n in 0..3 {
        db.ok(&["enqueue", "arch", &format!(r#"{{"n":{n}}}"#)]);
    }
    db.ok(&["enqueue", "other", "{}"]);
    let out = db
        .cmd(&["work", "arch", "--drain", "--", "true"])
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats = db.stats();
    assert_eq!(stats["arch"]["archived"], 3, "{stats}");
    assert_eq!(stats["arch"]["completed"], 0, "{stats}");
    assert_eq!(stats["arch"]["available"], 0, "{stats}");
    assert_eq!(stats["other"]["archived"], 0, "{stats}");
    assert_eq!(stats["other"]["available"], 1, "{stats}");
    let one: serde_json::Value =
        serde_json::from_str(&db.ok(&["stats", "arch", "--json"])).unwrap();
    assert_eq!(one, serde_json::json!({"arch": stats["arch"].clone()}));

    let text = db.ok(&["stats", "arch"]);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header.last(), Some(&"ARCHIVED"), "{text}");
    assert_eq!(row.first(), Some(&"arch"), "{text}");
    assert_eq!(row.last(), Some(&"3"), "{text}");
    assert_eq!(header.len(), row.len(), "{text}");
}

#[test]
fn sqlite_stats_count_archived_jobs() {
    stats_count_archived_jobs(Engine::Sqlite);
}

#[test]
fn postgres_stats_count_archived_jobs() {
    stats_count_archived_jobs(Engine::Postgres);
}

#[test]
fn mysql_stats_count_archived_jobs() {
    stats_count_archived_jobs(Engine::MySql);
}
