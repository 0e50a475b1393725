//! docs/sql.md's own examples (the blocks it marks `<!-- example: … -->`, written for the page
//! rather than copied from a query file) run as written on every backend: a plain-SQL producer
//! that copies one gets a working statement. A block's `-- PostgreSQL`, `-- MySQL …` and
//! `-- SQLite` comment lines say which engines the lines after them are for; a block without
//! one is for all. Each is run twice: the unique-key insert must then keep one job. And the
//! column tables of `backlog_job` and `backlog_queue` name exactly the columns each backend has
//! (the archive has the job's, but `shard`).

mod common;

use std::path::Path;

use common::{Engine, TestDb};

/// The example blocks: (line of the marker, the block's text).
fn examples(doc: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = vec![];
    for (i, line) in lines.iter().enumerate() {
        if !line.trim().starts_with("<!-- example:") {
            continue;
        }
        assert_eq!(
            lines[i + 1].trim(),
            "```sql",
            "line {}: no sql block",
            i + 1
        );
        let end = lines[i + 2..]
            .iter()
            .position(|l| l.trim() == "```")
            .expect("a closed block");
        out.push((i + 1, lines[i + 2..i + 2 + end].join("\n")));
    }
    out
}

/// The part of `block` for `engine`.
fn for_engine(block: &str, engine: Engine) -> String {
    let names: &[&str] = match engine {
        Engine::Postgres => &["PostgreSQL"],
        Engine::MySql | Engine::Galera => &["MySQL", "MariaDB"],
        Engine::Sqlite => &["SQLite"],
    };
    let headed = |l: &str| {
        l.starts_with("-- ")
            && ["PostgreSQL", "MySQL", "MariaDB", "SQLite"]
                .iter()
                .any(|n| l[3..].starts_with(n))
    };
    if !block.lines().any(headed) {
        return block.to_owned();
    }
    let mut mine = false;
    let mut out = vec![];
    for line in block.lines() {
        if headed(line) {
            let head = line.split(':').next().unwrap_or(line);
            mine = names.iter().any(|n| head.contains(n));
        } else if mine {
            out.push(line);
        }
    }
    out.join("\n")
}

async fn examples_run_as_written(engine: Engine) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../../docs/sql.md")).unwrap();
    let blocks = examples(&doc);
    assert!(blocks.len() >= 4, "only {} examples", blocks.len());
    let db = TestDb::new(engine).await;
    for (line, block) in &blocks {
        let sql = for_engine(block, engine);
        assert!(
            !sql.trim().is_empty(),
            "docs/sql.md line {line}: no statement for {engine:?}"
        );
        for _ in 0..2 {
            db.try_exec(&sql).await.unwrap_or_else(|e| {
                panic!("docs/sql.md line {line} fails on {engine:?}: {e}\n{sql}")
            });
        }
    }
    let keyed = "SELECT COUNT(*) FROM backlog_job_all WHERE unique_key = 'welcome:42'";
    assert_eq!(db.scalar(keyed).await, 1, "the key was not kept unique");
    db.drop_db().await;
}

/// The column names of the table under `### \`TABLE\`` that `engine` has: its cell in the
/// PostgreSQL, MySQL or SQLite column is not `—` (a table without those columns is for all).
fn documented_columns(doc: &str, table: &str, engine: Engine) -> Vec<String> {
    let head = format!("### `{table}`");
    let at = doc
        .find(&head)
        .unwrap_or_else(|| panic!("no section for {table}"));
    let mut out = vec![];
    for line in doc[at..]
        .lines()
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
    {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let first = cells[1];
        if first == "column" || first.starts_with("---") {
            continue;
        }
        let cell = match engine {
            Engine::Postgres => 2,
            Engine::MySql | Engine::Galera => 3,
            Engine::Sqlite => 4,
        };
        if cells.get(cell).is_some_and(|c| *c == "—") {
            continue;
        }
        for name in first.split(',') {
            out.push(name.trim().trim_matches('`').to_owned());
        }
    }
    out
}

async fn column_tables_match_the_schema(engine: Engine) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../../docs/sql.md")).unwrap();
    let db = TestDb::new(engine).await;
    let count = |table: &str| match engine {
        Engine::Sqlite => format!("SELECT COUNT(*) FROM pragma_table_info('{table}')"),
        Engine::Postgres => format!(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = \
             current_schema() AND table_name = '{table}'"
        ),
        _ => format!(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() \
             AND table_name = '{table}'"
        ),
    };
    for (table, also) in [
        ("backlog_job", "backlog_job_archive"),
        ("backlog_queue", ""),
    ] {
        let columns = documented_columns(&doc, table, engine);
        for c in &columns {
            let probe = format!("SELECT {c} FROM {table} WHERE 1 = 0");
            db.try_exec(&probe).await.unwrap_or_else(|e| {
                panic!("docs/sql.md names {table}.{c}, which {engine:?} lacks: {e}")
            });
            // Not in the archive: where a live job waits to be claimed, MySQL's key of unfinished
            // jobs, and what a job waits for and whether jobs wait for it (a finished job waits
            // for none, and its children were released when it finished).
            let live_only = ["shard", "unique_active", "deps_left", "has_dependents"];
            if !also.is_empty() && !live_only.contains(&c.as_str()) {
                let probe = format!("SELECT {c} FROM {also} WHERE 1 = 0");
                db.try_exec(&probe)
                    .await
                    .unwrap_or_else(|e| panic!("{also} lacks {c} on {engine:?}: {e}"));
            }
        }
        assert_eq!(
            db.scalar(&count(table)).await,
            columns.len() as i64,
            "{table} on {engine:?} has columns docs/sql.md does not list"
        );
    }
    db.drop_db().await;
}

backlog_testdb::on_every_backend!(examples_run_as_written, column_tables_match_the_schema);

/// On MySQL and MariaDB, a claim written before version 12 (no shard condition, forcing the claim
/// index by its old name, as docs/sql.md gave it) fails at once, saying why, rather than reading
/// and locking every available job of its queue; the claim that names the shard locks what it
/// returns.
#[cfg(feature = "servers")]
#[tokio::test]
async fn a_mysql_claim_written_before_version_12_fails_clearly() {
    let db = TestDb::new(Engine::MySql).await;
    db.exec("INSERT INTO backlog_job (queue, payload) SELECT 'q', '{}' FROM seq_1_to_2000")
        .await;
    let legacy = "SELECT id FROM backlog_job FORCE INDEX (backlog_job_claim) \
                  WHERE queue = 'q' AND state = 'available' AND run_at <= 9000000000000000 \
                  ORDER BY priority, run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED";
    let err = db.try_exec(legacy).await.unwrap_err().to_string();
    assert!(err.contains("backlog_job_claim"), "{err}");
    use sqlx::Connection as _;
    let mut c = sqlx::MySqlConnection::connect(db.direct()).await.unwrap();
    let mut tx = c.begin().await.unwrap();
    let claimed = sqlx::query(
        "SELECT id FROM backlog_job FORCE INDEX (backlog_job_shard_claim) \
         WHERE queue = 'q' AND state = 'available' AND shard = 0 AND run_at <= 9000000000000000 \
         ORDER BY priority, run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    assert_eq!(claimed.len(), 10);
    // InnoDB's INNODB_TRX is a cache refreshed at most every 100 ms: a transaction just begun
    // may not be in it yet.
    let mut locked = None;
    for _ in 0..50 {
        locked = sqlx::query_scalar::<_, u64>(
            "SELECT trx_rows_locked FROM information_schema.INNODB_TRX \
             WHERE trx_mysql_thread_id = CONNECTION_ID()",
        )
        .fetch_optional(&mut *tx)
        .await
        .unwrap();
        if locked.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let locked = locked.expect("the claim's transaction in INNODB_TRX");
    assert!(locked <= 40, "a claim of 10 locked {locked} rows of 2,000");
    tx.rollback().await.unwrap();
    db.drop_db().await;
}
