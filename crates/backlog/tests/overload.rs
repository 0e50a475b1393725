//! More callers than connections, on every backend (issue 18 item 7): callers beyond the pool's
//! `max_connections` wait their turn (the pool is the back-pressure) and all succeed, without
//! the pool growing past its bound; a pool held busy past the acquire timeout fails the next
//! call with a clear, transient `PoolTimeout` that changes nothing, and the same client goes on
//! once a connection is free. The million-job run is `backlog bench --overload`.

mod common;

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog::{BackendConfig, Client, DbErrorKind, Error, SqlBackend};
use common::{Engine, TestDb};

/// Connections the pool has open now (SQLite: its one writer connection).
fn pool_size(client: &Client) -> u32 {
    match client.sql().expect("a SQL backend") {
        SqlBackend::Sqlite(b) => b.pool().size(),
        SqlBackend::Postgres(b) => b.pool().size(),
        SqlBackend::MySql(b) => b.pool().size(),
    }
}

/// Takes `n` connections out of the client's pool (SQLite: its writer), held until dropped.
async fn hold(client: &Client, n: u32) -> Vec<Box<dyn Any + Send>> {
    let mut held: Vec<Box<dyn Any + Send>> = vec![];
    for _ in 0..n {
        held.push(match client.sql().expect("a SQL backend") {
            SqlBackend::Sqlite(b) => Box::new(b.pool().acquire().await.unwrap()),
            SqlBackend::Postgres(b) => Box::new(b.pool().acquire().await.unwrap()),
            SqlBackend::MySql(b) => Box::new(b.pool().acquire().await.unwrap()),
        });
    }
    held
}

async fn count(db: &TestDb, queue: &str) -> i64 {
    db.scalar(&format!(
        "SELECT count(*) FROM backlog_job_all WHERE queue = '{queue}'"
    ))
    .await
}

/// 200 producers at once on a pool of 4: every one gets its id, each job is there once, and the
/// pool never opened more than 4 connections.
async fn more_callers_than_connections(engine: Engine) {
    let db = TestDb::new(engine).await;
    let config = BackendConfig {
        max_connections: 4,
        ..BackendConfig::default()
    };
    let client = Arc::new(Client::connect_with(&db.url, &config).await.unwrap());
    let largest = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let callers: Vec<_> = (0..200)
        .map(|i| {
            let (c, largest) = (client.clone(), largest.clone());
            tokio::spawn(async move {
                let id = c.enqueue(c.new_job("over", &i)?).await?.id;
                largest.fetch_max(pool_size(&c), std::sync::atomic::Ordering::Relaxed);
                Ok::<_, Error>(id)
            })
        })
        .collect();
    let mut ids = vec![];
    for c in callers {
        ids.push(c.await.unwrap().expect("a caller that waited its turn"));
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 200);
    assert_eq!(count(&db, "over").await, 200);
    let bound = if engine == Engine::Sqlite { 1 } else { 4 };
    let largest = largest.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        (1..=bound).contains(&largest),
        "the pool grew to {largest} connections"
    );
    client.close().await;
    db.drop_db().await;
}

/// Every connection held: the next call fails after about the acquire timeout with
/// `PoolTimeout`, which says so and is transient; nothing was enqueued; once a connection is
/// free the same client enqueues.
async fn a_busy_pool_times_out_clearly(engine: Engine) {
    let db = TestDb::new(engine).await;
    let config = BackendConfig {
        max_connections: 2,
        acquire_timeout: Duration::from_millis(300),
        sqlite_busy_timeout: Duration::from_millis(300),
        ..BackendConfig::default()
    };
    let client = Client::connect_with(&db.url, &config).await.unwrap();
    let held = hold(&client, if engine == Engine::Sqlite { 1 } else { 2 }).await;
    let started = Instant::now();
    let err = client
        .enqueue(client.new_job("busy", &1).unwrap())
        .await
        .expect_err("every connection is held");
    let waited = started.elapsed();
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DbErrorKind::PoolTimeout,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_transient());
    let msg = err.to_string();
    assert!(msg.contains("acquire timeout"), "not a clear error: {msg}");
    // SQLite's writer waits at least its busy timeout and a second (`acquire_timeout`'s doc).
    let least = match engine {
        Engine::Sqlite => Duration::from_millis(1250),
        _ => Duration::from_millis(250),
    };
    assert!(
        waited >= least && waited < least + Duration::from_secs(5),
        "gave up after {waited:?}"
    );
    eprintln!("{engine:?}: gave up after {waited:?}: {msg}");
    drop(held);
    assert_eq!(
        count(&db, "busy").await,
        0,
        "a refused call changed nothing"
    );
    client
        .enqueue(client.new_job("busy", &2).unwrap())
        .await
        .expect("a connection is free again");
    assert_eq!(count(&db, "busy").await, 1);
    client.close().await;
    db.drop_db().await;
}

backlog_testdb::on_every_backend!(more_callers_than_connections, a_busy_pool_times_out_clearly);
/// On the servers: SQLite's pool is its single writer, which producers and workers take turns on.
#[cfg(feature = "servers")]
mod flood {
    use super::*;
    use backlog::{QueueName, QueueSettings, Retention};
    use common::CountingWorker;

    /// 64 producers flood a pool of 8 with batches while a worker of the same client drains: the
    /// producers use at most 6 of the connections (`enqueue_many`'s share), so the worker claims and
    /// completes while they run. Without the share, the worker of `bench --overload` completed 300
    /// jobs in the 10 s its producers took to enqueue 709,000: every connection was in an insert.
    async fn a_worker_drains_while_producers_flood_the_pool(engine: Engine) {
        const PRODUCERS: u64 = 64;
        const BATCHES: u64 = 12;
        const BATCH: u64 = 100;
        let total = PRODUCERS * BATCHES * BATCH;
        let db = TestDb::new(engine).await;
        let config = BackendConfig {
            max_connections: 8,
            ..BackendConfig::default()
        };
        let client = Arc::new(Client::connect_with(&db.url, &config).await.unwrap());
        let mut s = QueueSettings::defaults(QueueName::new("flood").unwrap());
        s.retention = Retention::Delete;
        client.queue_configure(&s).await.unwrap();
        let worker = CountingWorker::start(&client, "flood", 50);
        // Idle first, as a worker is before a burst.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let c = client.clone();
                tokio::spawn(async move {
                    for b in 0..BATCHES {
                        let jobs = (0..BATCH)
                            .map(|i| c.new_job("flood", &(p, b, i)).unwrap())
                            .collect();
                        c.enqueue_many(jobs).await.unwrap();
                    }
                })
            })
            .collect();
        for p in producers {
            p.await.unwrap();
        }
        let during = worker.ran();
        let started = Instant::now();
        while worker.ran() < total {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the drain stalled"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ran = worker.ran();
        worker.stop().await;
        eprintln!("{engine:?}: {during} of {total} jobs ran while the producers enqueued");
        assert_eq!(ran, total, "each job ran once");
        assert_eq!(count(&db, "flood").await, 0);
        assert!(
            during >= total / 50,
            "the worker ran only {during} of {total} jobs while the producers held the pool"
        );
        client.close().await;
        db.drop_db().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        a_worker_drains_while_producers_flood_the_pool(Engine::Postgres).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mysql() {
        a_worker_drains_while_producers_flood_the_pool(Engine::MySql).await
    }
}
