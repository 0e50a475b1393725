//! The database server restarted under four worker processes and a producer process
//! (PostgreSQL `pg_ctlcluster … restart`, fast and immediate modes in turn; MariaDB's `mariadbd`
//! stopped by SIGTERM or SIGKILL in turn and started again), on the servers of
//! `scripts/fault_server.sh`, never the main ones. No process is restarted: they reconnect by
//! themselves.
//!
//! CI runs 4,000 jobs and 3 restarts per backend; `BACKLOG_RESTART_JOBS` and `BACKLOG_RESTARTS`
//! set the counts for a full run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use backlog::QueueSettings;

use super::{Children, Engine, TestDb, each_done_once, producer, spawn_child_with};

const WORKERS: usize = 4;
/// How long an idle worker waits between polls: the default, so that a LISTEN connection that
/// did not come back would show.
const POLL_MS: &str = "1000";

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `scripts/fault_server.sh`, the one way to create, start and restart the fault servers.
fn fault_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fault_server.sh")
}

/// Runs `fault_server.sh ARGS` to its end; a failure fails the test (never a skip).
pub(super) fn fault_server(args: &[&str]) {
    run_script(&fault_script(), args);
}

/// Runs a script of `scripts/` to its end; a failure fails the test (never a skip).
pub(super) fn run_script(script: &Path, args: &[&str]) {
    let out = Command::new(script).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{} {} failed: {}",
        script.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Holds the fault server of `engine` for one test at a time, across test processes too (a
/// lock on a file, released when the test ends or its process dies): a restart must not run
/// into another test's restart.
pub(super) async fn own_server(engine: Engine) -> std::fs::File {
    own_lock(backend(engine)).await
}

/// Holds the lock file of `server` (see [`own_server`]).
pub(super) async fn own_lock(server: &str) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("backlog-fault-{server}.lock"));
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::create(&path).unwrap();
        file.lock().unwrap();
        file
    })
    .await
    .unwrap()
}

/// How a restart stops the server.
fn modes(engine: Engine) -> [&'static str; 2] {
    match engine {
        Engine::Postgres => ["fast", "immediate"],
        Engine::MySql => ["term", "kill"],
        Engine::Sqlite | Engine::Galera => unreachable!("no fault server"),
    }
}

pub(super) fn backend(engine: Engine) -> &'static str {
    match engine {
        Engine::Postgres => "postgres",
        Engine::MySql => "mysql",
        Engine::Sqlite | Engine::Galera => unreachable!("no fault server"),
    }
}

/// A count on a fresh connection (the server may be down: then `None`), within a second.
async fn probe(engine: Engine, url: &str, sql: &str) -> Option<i64> {
    use sqlx::Connection;
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    let read = async {
        match engine {
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(url).await.ok()?;
                let n = sqlx::query_scalar(sql).fetch_one(&mut c).await.ok();
                let _ = c.close().await;
                n
            }
            Engine::MySql | Engine::Galera => {
                let mut c = sqlx::MySqlConnection::connect(url).await.ok()?;
                let n = sqlx::query_scalar(sql).fetch_one(&mut c).await.ok();
                let _ = c.close().await;
                n
            }
            Engine::Sqlite => unreachable!(),
        }
    };
    tokio::time::timeout(Duration::from_secs(1), read)
        .await
        .ok()
        .flatten()
}

/// One restart as the test saw it.
#[derive(Debug)]
struct Restart {
    mode: &'static str,
    /// From the restart's start until the server answered again.
    down: Duration,
    /// From the server answering again to the first job completed after.
    recovery: Duration,
    /// PostgreSQL: from the server answering again until every worker process LISTENs again.
    listen: Option<Duration>,
}

/// Restarts the server while watching it: returns once the server answers and a job completed
/// after it came back (and, on PostgreSQL, every worker LISTENs again).
async fn restart(
    engine: Engine,
    mode: &'static str,
    watch_url: &str,
    results: &str,
    listeners: Option<&str>,
) -> Restart {
    let count = format!("SELECT COUNT(*) FROM {results}");
    let start = Instant::now();
    let mut script: Child = Command::new(fault_script())
        .args(["restart", backend(engine), mode])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut went_down, mut up, mut recovered, mut listen) = (false, None, None, None);
    let mut at_up = 0;
    let mut done = false;
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{mode} restart: no job completed within 90 s (server up after {up:?})"
        );
        if !done && let Some(status) = script.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            script
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            assert!(status.success(), "fault_server.sh restart failed: {err}");
            done = true;
        }
        let n = probe(engine, watch_url, &count).await;
        match (n, up) {
            (None, _) => went_down = true,
            // The script's return proves a restart even if no probe fell into a short outage.
            (Some(n), None) if went_down || done => {
                up = Some(start.elapsed());
                at_up = n;
            }
            (Some(n), Some(u)) if recovered.is_none() && n > at_up => {
                recovered = Some(start.elapsed() - u)
            }
            _ => {}
        }
        if let (Some(u), Some(sql), None) = (up, listeners, listen)
            && probe(engine, watch_url, sql).await == Some(WORKERS as i64)
        {
            listen = Some(start.elapsed() - u);
        }
        if done && recovered.is_some() && (listeners.is_none() || listen.is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Restart {
        mode,
        down: up.unwrap(),
        recovery: recovered.unwrap(),
        listen,
    }
}

/// Four worker processes complete jobs transactionally (one results row each, in the job's own
/// transaction) while a producer process enqueues them one call at a time, and the database
/// server is restarted K times, spread over the producer's run. Nothing is restarted but the
/// server. At the end: every job completed exactly once, every id the producer was given
/// exists and is completed, no job was lost or enqueued twice, every producer error was
/// reported as transient, attempts within the queue's limit, and the workers drain and exit.
///
/// The PostgreSQL fault cluster runs with autovacuum on, as users' servers do; with
/// `autovacuum` false the test's tables opt out of it, as on the machine's main cluster.
async fn restarts(engine: Engine, autovacuum: bool) {
    let jobs = env_count("BACKLOG_RESTART_JOBS", 4_000) as i64;
    let times = env_count("BACKLOG_RESTARTS", 3);
    let _server = own_server(engine).await;
    fault_server(&["ensure", backend(engine)]);
    let base = match engine {
        Engine::Postgres => backlog_testdb::pg_fault_base(),
        _ => backlog_testdb::my_fault_base(),
    };
    let db = TestDb::new_on(engine, &base).await;
    db.create_results().await;
    if !autovacuum {
        db.exec(
            // Every table that holds rows (a partitioned table holds none: its partitions do).
            "DO $$ DECLARE t record; BEGIN \
             FOR t IN SELECT relname FROM pg_class \
                 WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r' LOOP \
             EXECUTE format('ALTER TABLE %I SET (autovacuum_enabled = false)', t.relname); \
             END LOOP; END $$",
        )
        .await;
        let left = db
            .scalar(
                "SELECT COUNT(*) FROM pg_class c \
                 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' \
                 AND NOT 'autovacuum_enabled=false' = ANY(coalesce(c.reloptions, '{}'))",
            )
            .await;
        assert_eq!(left, 0, "tables left to autovacuum");
    }
    let hold = producer::hold_drain(&db.client).await;

    let tag = format!("bl_rs_{:08x}", rand::random::<u32>());
    let (url, producer_url, results, listeners) = match engine {
        Engine::Postgres => (
            format!("{}&application_name={tag}", db.url),
            format!("{}&application_name={tag}_p", db.url),
            format!("{}.results", db.name()),
            Some(format!(
                "SELECT COUNT(*) FROM pg_stat_activity \
                 WHERE application_name = '{tag}' AND query LIKE 'LISTEN%'"
            )),
        ),
        _ => (
            db.url.clone(),
            db.url.clone(),
            format!("{}.results", db.name()),
            None,
        ),
    };
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("producer.txt");
    let worker_env = [("BACKLOG_CHILD_POLL_MS", POLL_MS.to_owned())];
    let mut workers = Children(
        (0..WORKERS)
            .map(|i| spawn_child_with("fire", &url, &format!("rs-{i}"), &worker_env))
            .collect(),
    );
    let started = Instant::now();
    let mut producer = Children(vec![producer::spawn(&producer_url, 0, jobs, &calls)]);
    let mut figures = Vec::new();
    for r in 0..times {
        // Restart r once the producer has enqueued (r + 1) / (times + 1) of the jobs.
        let due = (r as i64 + 1) * jobs / (times as i64 + 1);
        while (producer::read_calls(&calls).ids.len() as i64) < due {
            assert!(
                producer.0[0].try_wait().unwrap().is_none(),
                "the producer exited early"
            );
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "the producer made no progress"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mode = modes(engine)[r % 2];
        let restart = restart(engine, mode, &base, &results, listeners.as_deref()).await;
        eprintln!("{engine:?}: restart {}: {restart:?}", r + 1);
        figures.push(restart);
    }
    // The producer ends on its own, then the held job is cancelled and the workers drain.
    producer::wait(&mut producer.0[0], Duration::from_secs(300)).await;
    db.client.cancel(hold).await.unwrap();
    workers.wait_drained(Duration::from_secs(60)).await;
    let took = started.elapsed();

    let (calls, attempts) =
        producer::check_calls(&db, &calls, 0, jobs, QueueSettings::DEFAULT_MAX_ATTEMPTS).await;
    each_done_once(&db, jobs).await;
    let joined = db
        .scalar(
            "SELECT COUNT(*) FROM results r JOIN backlog_job_all j ON j.id = r.job_id \
             WHERE j.state = 'completed' AND j.unique_key IS NOT NULL",
        )
        .await;
    assert_eq!(
        joined, jobs,
        "results rows that are not the producer's jobs"
    );
    assert_eq!(figures.len(), times);
    let most = |f: fn(&Restart) -> Duration| figures.iter().map(f).max().unwrap();
    eprintln!(
        "{engine:?}{}: {jobs} jobs, {times} restarts ({}), {:.1}s; longest down {:?}, \
         longest recovery {:?}{}; producer: {} errors, {} found after an error, {} reused; \
         most attempts {attempts}",
        if autovacuum { "" } else { " (autovacuum off)" },
        figures.iter().map(|f| f.mode).collect::<Vec<_>>().join(" "),
        took.as_secs_f64(),
        most(|f| f.down),
        most(|f| f.recovery),
        figures
            .iter()
            .filter_map(|f| f.listen)
            .max()
            .map_or(String::new(), |l| format!(", longest LISTEN back {l:?}")),
        calls.errors,
        calls.found,
        calls.reused,
    );
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    restarts(Engine::Postgres, true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_autovacuum_off() {
    restarts(Engine::Postgres, false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql() {
    restarts(Engine::MySql, true).await
}
