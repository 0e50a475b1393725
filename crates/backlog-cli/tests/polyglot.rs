//! One queue, four languages (issue 48): the Python, TypeScript and Ruby clients' SQL workers and
//! `backlog work` (Rust) drain the same queue at the same time, 20,000 jobs on PostgreSQL (4,000
//! on SQLite and MariaDB), every tenth failing its first attempt. Each job ends completed once:
//! every completion a client logged is the row's completion of record (the row names that
//! worker as its last owner), no job is completed by two workers, the jobs no client completed
//! ran in `backlog work` at the attempt their row ends with, and every language took a share.
//! Python, Node (with the TypeScript package's npm dependencies) and Ruby are required: a
//! missing one fails the test.
#![cfg(feature = "servers")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::client_contract::*;
use common::languages::{node, python_worker, rb_worker, ts_worker};
use common::{Engine, TestDb};

fn polyglot(engine: Engine, n: i64) {
    // The TypeScript package compiled before the clock starts (its first `node()` builds it).
    drop(node());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(240);
    let db = TestDb::new(engine);
    let q = "polyglot";
    db.ok(&[
        "queue",
        "set",
        q,
        "--backoff-base",
        "50ms",
        "--backoff-max",
        "100ms",
    ]);
    write_jsonl(&db.path("jobs.jsonl"), 0..n);
    let out = db.ok(&["enqueue", q, "--jsonl", "jobs.jsonl"]);
    assert_eq!(out.trim(), n.to_string());

    // Each job takes a little time, so that no worker drains the queue before the slowest to
    // start (Node) has begun: every language takes a share.
    let fast = ["--work-ms", "2", "--batch", "50"];
    let workers = [
        python_worker(&db, q, "python", &fast),
        ts_worker(&db, q, "typescript", &fast),
        rb_worker(&db, q, "ruby", &fast),
        backlog_worker(&db, q, "rust"),
    ];
    for w in workers {
        w.finish(deadline);
    }

    let rows = rows(&db, q);
    assert_eq!(rows.len() as i64, n);
    let unfinished: Vec<_> = rows
        .iter()
        .filter(|(_, r)| r.state != "completed")
        .collect();
    assert!(
        unfinished.is_empty(),
        "{} jobs not completed",
        unfinished.len()
    );
    let payloads: BTreeSet<i64> = rows.values().map(|r| r.i).collect();
    assert_eq!(payloads, (0..n).collect(), "payloads lost or doubled");

    let clients = ["python", "typescript", "ruby"];
    let mut completed_by: BTreeMap<i64, &str> = BTreeMap::new();
    let mut shares: BTreeMap<&str, usize> = BTreeMap::new();
    for name in clients {
        for e in events(&db, name).iter().filter(|e| e.what == "completed") {
            if let Some(other) = completed_by.insert(e.id, name) {
                panic!("job {} completed by {other} and by {name}", e.id);
            }
            let row = &rows[&e.id];
            assert_eq!(
                row.owner, name,
                "{name}'s completion of job {} was not kept",
                e.id
            );
            assert_eq!(row.i, e.i);
            *shares.entry(name).or_default() += 1;
        }
    }
    let rust_runs: BTreeSet<(i64, i64)> = events(&db, "rust")
        .iter()
        .filter(|e| e.what == "run")
        .map(|e| (e.id, e.attempt.unwrap()))
        .collect();
    for (id, row) in rows.iter().filter(|(id, _)| !completed_by.contains_key(id)) {
        assert!(
            !clients.contains(&row.owner.as_str()),
            "job {id} is {}'s but it never completed it",
            row.owner
        );
        assert!(
            rust_runs.contains(&(*id, row.attempt)),
            "job {id} completed by {} without its attempt {} running in backlog work",
            row.owner,
            row.attempt
        );
        *shares.entry("rust").or_default() += 1;
    }
    assert_eq!(shares.values().sum::<usize>() as i64, n);
    for name in ["python", "typescript", "ruby", "rust"] {
        assert!(
            shares.get(name).copied().unwrap_or(0) > 0,
            "{name} completed no job: {shares:?}"
        );
    }
    for (id, row) in rows.iter().filter(|(_, r)| r.fail_once) {
        assert!(row.attempt >= 2, "job {id} failing once ended at attempt 1");
    }
    eprintln!(
        "{engine:?}: {n} jobs completed once each, {shares:?}, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn sqlite_four_languages_one_queue() {
    polyglot(Engine::Sqlite, 4_000);
}

#[test]
fn postgres_four_languages_one_queue() {
    polyglot(Engine::Postgres, 20_000);
}

#[test]
fn mysql_four_languages_one_queue() {
    polyglot(Engine::MySql, 4_000);
}
