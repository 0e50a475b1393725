//! SQLite: the plan of every statement in the catalog, from `EXPLAIN QUERY PLAN` on a migrated
//! database. A statement that reads the whole job table runs in time that grows with every job
//! queued; only the ones listed here with their reason may.

// The conformance suite's harness: this test uses its SQLite database only.
#[allow(dead_code, unused_macros, unused_imports)]
mod harness;

use backlog_sql::catalog::entries;
use sqlx::{Connection, Row, SqliteConnection};

/// Statements allowed to scan `backlog_job`, and why.
const SCANS: &[(&str, &str)] = &[
    (
        "job_count_pending",
        "counts a queue's pending jobs: asked by a draining worker when a claim came back empty, \
         not per claim",
    ),
    (
        "queue_stats_scan",
        "counts of every queue and state by a scan, to check the kept ones (backlog_count)",
    ),
];

#[tokio::test]
async fn no_statement_reads_the_whole_job_table_unless_listed() {
    let db = harness::Db::sqlite().await;
    let mut conn = SqliteConnection::connect(&db.url).await.unwrap();
    let mut scans = vec![];
    // Statements whose text is completed per call (a list of rows spliced in) are inserts.
    let whole = entries("sqlite")
        .iter()
        .filter(|e| e.params.iter().all(|(_, _, kind)| *kind == "param"))
        .collect::<Vec<_>>();
    let files = whole.len();
    let mut explained = 0;
    for e in whole {
        // A file of several statements (one command: `job_claim_json_*`) is explained
        // statement by statement, its comments left out: `EXPLAIN QUERY PLAN` covers the
        // statement it precedes.
        let code: String = e
            .text
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .map(|l| format!("{l}\n"))
            .collect();
        for statement in code.split(";\n").filter(|s| !s.trim().is_empty()) {
            let sql = format!("EXPLAIN QUERY PLAN {statement}");
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            // One value per placeholder (`binds` lists them in order: `?1`, `?2`, …).
            for _ in e.binds {
                q = q.bind(None::<i64>);
            }
            let rows = q.fetch_all(&mut conn).await.unwrap_or_else(|err| {
                panic!("{}: {err}", e.name);
            });
            explained += 1;
            for row in rows {
                let detail: String = row.get("detail");
                if detail.starts_with("SCAN backlog_job")
                    && !detail.starts_with("SCAN backlog_job_")
                {
                    scans.push(format!("{}: {detail}", e.name));
                }
            }
        }
    }
    assert!(
        explained > files,
        "{explained} statements explained, of {files} files: the files of several were not split"
    );
    let unexpected: Vec<_> = scans
        .iter()
        .filter(|s| {
            !SCANS
                .iter()
                .any(|(name, _)| s.starts_with(&format!("{name}:")))
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "full scans of backlog_job:\n{unexpected:#?}"
    );
}
