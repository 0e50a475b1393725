//! A Galera node killed under workers and producers spread over the 3-node cluster of
//! `scripts/galera.sh`: four worker processes, each given the node list from another node on,
//! and a producer per node. One node is SIGKILLed once a third of the jobs are enqueued and
//! started again (it rejoins by IST) at two thirds. No process is restarted: those on the dead
//! node move to the next node of their list by themselves (`BackendConfig::host_check_every`).
//!
//! A fifth worker names the killed node alone: it must wait for the node through its outage and
//! its state transfer, and drain with the others.
//!
//! CI runs 3,000 jobs; `BACKLOG_NODE_KILL_JOBS` sets the count for a full run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backlog::QueueSettings;

use super::restarts::{own_lock, run_script};
use super::{Children, Engine, TestDb, each_done_once, producer, spawn_child_with};

const WORKERS: usize = 4;
const NODES: usize = 3;

fn galera_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/galera.sh")
}

/// Runs `galera.sh ARGS` to its end; a failure fails the test (never a skip).
fn galera(args: &[&str]) {
    run_script(&galera_script(), args);
}

/// Waits until more than `than` results rows exist; how long that took.
async fn next_completion(db: &TestDb, than: i64) -> Duration {
    let since = Instant::now();
    while db.scalar("SELECT COUNT(*) FROM results").await <= than {
        assert!(
            since.elapsed() < Duration::from_secs(120),
            "no job completed within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    since.elapsed()
}

/// Transactions a node rolled back for a conflict with another node's: certification failures
/// of its own commits and its transactions aborted by replicated ones.
async fn conflicts(url: &str) -> i64 {
    use sqlx::{Connection, Row};
    let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
    let rows = sqlx::query(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    c.close().await.ok();
    rows.iter()
        .map(|r| r.get::<String, _>(1).parse::<i64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn galera_node_killed_and_rejoined() {
    let jobs = std::env::var("BACKLOG_NODE_KILL_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000i64);
    let _cluster = own_lock("galera").await;
    galera(&["ensure"]);
    let db = TestDb::new(Engine::Galera).await;
    db.create_results().await;
    let hold = producer::hold_drain(&db.client).await;
    let dir = tempfile::tempdir().unwrap();
    let worker_env = [("BACKLOG_CHILD_POLL_MS", "200".to_owned())];
    let mut workers = Children(
        (0..WORKERS)
            .map(|i| {
                let url = backlog_testdb::galera_list(db.name(), i % NODES);
                spawn_child_with("fire", &url, &format!("gk-{i}"), &worker_env)
            })
            .collect(),
    );
    let started = Instant::now();
    // A producer per node, each enqueueing its own third of the jobs.
    let share = jobs / NODES as i64;
    let files: Vec<PathBuf> = (0..NODES)
        .map(|n| dir.path().join(format!("producer-{n}.txt")))
        .collect();
    let mut producers = Children(
        (0..NODES)
            .map(|n| {
                let url = backlog_testdb::galera_list(db.name(), n);
                let count = if n == NODES - 1 {
                    jobs - share * n as i64
                } else {
                    share
                };
                producer::spawn(&url, share * n as i64, count, &files[n])
            })
            .collect(),
    );
    let enqueued = || -> i64 {
        files
            .iter()
            .map(|f| producer::read_calls(f).ids.len() as i64)
            .sum()
    };
    let wait_enqueued = async |due: i64| {
        while enqueued() < due {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "the producers made no progress"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    // Any node but the one this test's own connections read from (the script numbers the
    // nodes in the list's order, from 1).
    let others: Vec<usize> = backlog_testdb::galera_nodes(db.name(), 0)
        .iter()
        .enumerate()
        .filter(|(_, url)| *url != db.direct())
        .map(|(i, _)| i + 1)
        .collect();
    let victim = others[rand::random_range(0..others.len())];
    let survivors: Vec<String> = backlog_testdb::galera_nodes(db.name(), 0)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i + 1 != victim)
        .map(|(_, url)| url)
        .collect();
    // One more worker names the victim alone: it has no other host to move to, so it waits
    // through the outage and the node's state transfer (a joining node answers 1047 "WSREP
    // has not yet prepared node for application use") and carries on once the node is synced.
    let victim_url = backlog_testdb::galera_nodes(db.name(), 0)[victim - 1].clone();
    workers.0.push(spawn_child_with(
        "fire",
        &victim_url,
        "gk-alone",
        &worker_env,
    ));
    let mut conflicts_before = 0;
    for url in &survivors {
        conflicts_before += conflicts(url).await;
    }
    wait_enqueued(jobs / 3).await;
    let done = db.scalar("SELECT COUNT(*) FROM results").await;
    let kill = Instant::now();
    galera(&["kill", &victim.to_string()]);
    let dropped = kill.elapsed();
    // The cluster goes on without the node; the first job completed after it was dropped.
    let recovery = next_completion(&db, db.scalar("SELECT COUNT(*) FROM results").await).await;
    eprintln!(
        "Galera: node {victim} killed after {done} jobs done; dropped from the cluster in {dropped:?}, \
         next job completed {recovery:?} after that"
    );
    wait_enqueued(jobs * 2 / 3).await;
    let rejoin = Instant::now();
    galera(&["start", &victim.to_string()]);
    let rejoined = rejoin.elapsed();
    let alone = workers.0.last_mut().unwrap();
    assert!(
        alone.try_wait().unwrap().is_none(),
        "the worker on node {victim} alone exited while the node was away or joining"
    );
    for p in &mut producers.0 {
        producer::wait(p, Duration::from_secs(300)).await;
    }
    db.client.cancel(hold).await.unwrap();
    workers.wait_drained(Duration::from_secs(120)).await;
    let took = started.elapsed();
    let mut conflicted = -conflicts_before;
    for url in &survivors {
        conflicted += conflicts(url).await;
    }

    // One record of every producer's calls, checked as one producer's.
    let all = dir.path().join("producers.txt");
    let text: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    std::fs::write(&all, text).unwrap();
    let (calls, attempts) =
        producer::check_calls(&db, &all, 0, jobs, QueueSettings::DEFAULT_MAX_ATTEMPTS).await;
    each_done_once(&db, jobs).await;
    eprintln!(
        "Galera: {jobs} jobs by {NODES} producers ({} errors, {} found committed) and {WORKERS} \
         workers over {NODES} nodes; node {victim} killed and rejoined in {rejoined:?}; most \
         attempts {attempts}; {conflicted} conflicts rolled back on the other two nodes \
         ({:.1} per 1,000 jobs); {:.1}s ({:.0} jobs/s)",
        calls.errors,
        calls.found,
        conflicted as f64 * 1000.0 / jobs as f64,
        took.as_secs_f64(),
        jobs as f64 / took.as_secs_f64()
    );
    db.drop_db().await;
}
