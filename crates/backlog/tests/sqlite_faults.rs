//! SQLite's own faults (issue 18 item 5): a lock another process holds past the busy timeout, a
//! full disk, and a corrupt file. Each gives a clear error, the process goes on (or stops
//! cleanly), and afterwards `PRAGMA integrity_check` passes with every acknowledged job there.
//!
//! The full disk is a file-size limit (`RLIMIT_FSIZE`) on a child process, which is this test
//! binary run again with `BACKLOG_FAULT_ROLE` set: the database's files cannot grow past it, as
//! on a full file system, without mounting one.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use backlog::{BackendConfig, Client, DbErrorKind, Error};
use sqlx::{Connection, SqliteConnection};

fn url_of(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("q.db").display())
}

/// `PRAGMA integrity_check` on its own connection.
async fn integrity(url: &str) -> String {
    let mut c = SqliteConnection::connect(url).await.unwrap();
    sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut c)
        .await
        .unwrap()
}

async fn all_there(client: &Client, ids: &[i64]) {
    for &id in ids {
        if let Err(e) = client.job(id).await {
            panic!("acknowledged job {id} is gone: {e}");
        }
    }
}

/// Another process holds the write lock past the busy timeout: an enqueue fails with a lock
/// timeout that says so, within the timeout and a little; once the lock is gone, the same
/// client goes on, and nothing acknowledged is lost.
#[tokio::test]
async fn a_lock_held_past_the_busy_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let url = url_of(&dir);
    let config = BackendConfig {
        sqlite_busy_timeout: Duration::from_millis(300),
        ..BackendConfig::default()
    };
    let client = Client::connect_with(&url, &config).await.unwrap();
    client.migrate().await.unwrap();
    let mut acked = vec![];
    for i in 0..20 {
        acked.push(
            client
                .enqueue(client.new_job("q", &i).unwrap())
                .await
                .unwrap()
                .id,
        );
    }
    let mut holder = SqliteConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("BEGIN EXCLUSIVE")
        .execute(&mut holder)
        .await
        .unwrap();
    let started = Instant::now();
    let err = client
        .enqueue(client.new_job("q", &"blocked").unwrap())
        .await
        .expect_err("the database is locked by another connection");
    let waited = started.elapsed();
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DbErrorKind::LockTimeout,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("locked"), "{err}");
    assert!(
        waited >= Duration::from_millis(250),
        "gave up after {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    eprintln!("locked for {waited:?}: {err}");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    holder.close().await.unwrap();
    acked.push(
        client
            .enqueue(client.new_job("q", &"after").unwrap())
            .await
            .unwrap()
            .id,
    );
    all_there(&client, &acked).await;
    assert_eq!(
        client.jobs(None, None, 0, 100).await.unwrap().len(),
        acked.len()
    );
    client.close().await;
    assert_eq!(integrity(&url).await, "ok");
}

/// The child of `a_full_disk`: enqueues 4 KiB jobs one at a time under a file-size limit,
/// printing `ok ID` for each acknowledged one, then `err MESSAGE` for the first refusal; then
/// shows it still reads the database (`read N`) and exits 0.
#[tokio::test]
async fn fault_child() {
    let Ok(role) = std::env::var("BACKLOG_FAULT_ROLE") else {
        return; // run by `a_full_disk` only
    };
    assert_eq!(role, "fill");
    // The test harness has printed "test fault_child ... " without a newline: the first line
    // of ours starts on a line of its own.
    println!();
    let url = std::env::var("BACKLOG_FAULT_URL").unwrap();
    let limit: u64 = std::env::var("BACKLOG_FAULT_LIMIT")
        .unwrap()
        .parse()
        .unwrap();
    // Past the limit a write fails with EFBIG instead of killing the process with SIGXFSZ: the
    // signal is blocked here, before the connection's threads start (they inherit the mask).
    nix::sys::signal::SigSet::from(nix::sys::signal::Signal::SIGXFSZ)
        .thread_block()
        .unwrap();
    let client = Client::connect(&url).await.unwrap();
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, limit, limit)
        .unwrap();
    let payload = "x".repeat(4096);
    for _ in 0..100_000 {
        match client.enqueue(client.new_job("q", &payload).unwrap()).await {
            Ok(o) => println!("ok {}", o.id),
            Err(e) => {
                println!("err {e}");
                break;
            }
        }
    }
    let listed = client.jobs(None, None, 0, 10).await.unwrap();
    println!("read {}", listed.len());
    client.close().await;
}

/// The disk fills up under a producer: the enqueue that does not fit fails with the database's
/// own words ("database or disk is full", or a disk I/O error), the producer goes on reading and
/// exits cleanly, and afterwards the file passes `integrity_check` with every job that was
/// acknowledged in it.
#[tokio::test]
async fn a_full_disk() {
    let dir = tempfile::tempdir().unwrap();
    let url = url_of(&dir);
    let client = Client::connect(&url).await.unwrap();
    client.migrate().await.unwrap();
    client.close().await;
    let size = std::fs::metadata(dir.path().join("q.db")).unwrap().len();
    let limit = size.max(64 * 1024) + 512 * 1024;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fault_child", "--nocapture", "--test-threads=1"])
        .env("BACKLOG_FAULT_ROLE", "fill")
        .env("BACKLOG_FAULT_URL", &url)
        .env("BACKLOG_FAULT_LIMIT", limit.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut acked, mut refused, mut read) = (vec![], None, None);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(id) = line.strip_prefix("ok ") {
            acked.push(id.parse::<i64>().unwrap());
        } else if let Some(e) = line.strip_prefix("err ") {
            refused = Some(e.to_owned());
        } else if let Some(n) = line.strip_prefix("read ") {
            read = Some(n.parse::<usize>().unwrap());
        }
    }
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the producer did not exit cleanly: {status}"
    );
    let refused = refused.expect("the disk never filled up");
    assert!(
        refused.contains("full") || refused.contains("disk I/O"),
        "not a clear error: {refused}"
    );
    assert!(
        read.is_some(),
        "the producer could not read after the disk filled up"
    );
    assert!(acked.len() >= 10, "only {} jobs fitted", acked.len());
    assert_eq!(integrity(&url).await, "ok");
    eprintln!(
        "full disk: {} jobs acknowledged under a {limit}-byte limit, then: {refused}",
        acked.len()
    );
    let client = Client::connect(&url).await.unwrap();
    all_there(&client, &acked).await;
    client.close().await;
}

/// A file that is not a database (its header overwritten) or is cut short: opening it gives a
/// clear error, not a panic and not an empty queue.
#[tokio::test]
async fn a_corrupt_or_torn_file() {
    for damage in ["overwritten", "torn"] {
        let dir = tempfile::tempdir().unwrap();
        let url = url_of(&dir);
        let client = Client::connect(&url).await.unwrap();
        client.migrate().await.unwrap();
        let jobs = (0..500).map(|i| client.new_job("q", &i).unwrap()).collect();
        client.enqueue_many(jobs).await.unwrap();
        client.close().await;
        let path = dir.path().join("q.db");
        let mut bytes = std::fs::read(&path).unwrap();
        // Closing the last connection checkpointed the WAL into the file and removed it.
        assert!(!dir.path().join("q.db-wal").exists());
        match damage {
            "overwritten" => bytes[..100].fill(0x5a),
            _ => bytes.truncate(bytes.len() / 2),
        }
        std::fs::write(&path, &bytes).unwrap();
        let opened = async {
            let client = Client::connect(&url).await?;
            client.migrate().await?;
            client.jobs(None, None, 0, 1000).await
        };
        let err = opened.await.expect_err(damage);
        assert!(
            !matches!(
                err,
                Error::Database {
                    kind: DbErrorKind::ConnectionLost,
                    ..
                }
            ),
            "{damage}: a damaged file is not a lost connection: {err:?}"
        );
        let msg = err.to_string();
        eprintln!("{damage} file: {msg}");
        assert!(
            msg.contains("not a database") || msg.contains("malformed") || msg.contains("corrupt"),
            "{damage}: not a clear error: {msg}"
        );
    }
}
