//! Test databases for backlog's own tests (the runtime's, the server's): a fresh SQLite file,
//! PostgreSQL schema or MariaDB database per test, migrated. `BACKLOG_TEST_POSTGRES_URL` and
//! `BACKLOG_TEST_MYSQL_URL` say where the servers are.
//!
//! Two tiers: a plain `cargo test` builds the tests of SQLite and the in-memory backend only,
//! which need nothing started; with feature `servers` (on in `scripts/test.sh` and CI) the tests
//! of PostgreSQL, MariaDB, Galera and PgBouncer are built too, and a server that cannot be
//! reached fails them: they are never skipped at run time.
#![allow(missing_docs)]

pub mod proxy;

use std::sync::Arc;

use backlog::{Client, JobTx, SqlBackend};
use sqlx::Connection;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
    MySql,
    /// The 3-node MariaDB Galera cluster of `scripts/galera.sh`: the MySQL dialect, with
    /// clients given a URL that lists every node, starting at a random one.
    Galera,
}

/// Whether this build has the server tier (feature `servers`).
pub const SERVERS: bool = cfg!(feature = "servers");

/// The backends a test that loops over them runs on: SQLite, and with the server tier
/// PostgreSQL and MariaDB.
pub const ENGINES: &[Engine] = if SERVERS {
    &[Engine::Sqlite, Engine::Postgres, Engine::MySql]
} else {
    &[Engine::Sqlite]
};

/// Its input with the server tier (feature `servers`), nothing without: what the tests of the
/// servers are wrapped in.
#[cfg(feature = "servers")]
#[macro_export]
macro_rules! with_servers {
    ($($item:tt)*) => { $($item)* };
}

/// Its input with the server tier (feature `servers`), nothing without: what the tests of the
/// servers are wrapped in.
#[cfg(not(feature = "servers"))]
#[macro_export]
macro_rules! with_servers {
    ($($item:tt)*) => {};
}

pub fn pg_base() -> String {
    std::env::var("BACKLOG_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

pub fn my_base() -> String {
    std::env::var("BACKLOG_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// PgBouncer in transaction pooling mode in front of the PostgreSQL of [`pg_base`]
/// (`scripts/pgbouncer.sh`): `BACKLOG_TEST_PGBOUNCER_URL`. Any database name reaches the
/// same-named database behind it.
pub fn pgbouncer_base() -> String {
    std::env::var("BACKLOG_TEST_PGBOUNCER_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:6432/test".into())
}

/// The PostgreSQL server the fault tests restart, apart from the main one
/// (`scripts/fault_server.sh`): `BACKLOG_TEST_FAULT_POSTGRES_URL`.
pub fn pg_fault_base() -> String {
    std::env::var("BACKLOG_TEST_FAULT_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5433/test".into())
}

/// The MariaDB server the fault tests restart, apart from the main one
/// (`scripts/fault_server.sh`): `BACKLOG_TEST_FAULT_MYSQL_URL`.
pub fn my_fault_base() -> String {
    std::env::var("BACKLOG_TEST_FAULT_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3307/test".into())
}

/// The Galera cluster's nodes as one URL (`BACKLOG_TEST_GALERA_URL`), with database `test`.
pub fn galera_base() -> String {
    std::env::var("BACKLOG_TEST_GALERA_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/test".into())
}

/// The user part (`mysql://user`) and the hosts of the Galera cluster's URL.
fn galera_hosts() -> (String, Vec<String>) {
    let all = galera_base();
    let (head, rest) = all.split_once('@').expect("user@hosts");
    let (hosts, _) = rest.split_once('/').expect("hosts/database");
    (
        head.to_owned(),
        hosts.split(',').map(str::to_owned).collect(),
    )
}

/// The Galera cluster's node URLs naming database `db`, in the list's order from node `first`.
pub fn galera_nodes(db: &str, first: usize) -> Vec<String> {
    let (head, mut hosts) = galera_hosts();
    let n = hosts.len();
    hosts.rotate_left(first % n);
    hosts.iter().map(|h| format!("{head}@{h}/{db}")).collect()
}

/// One URL listing the Galera nodes from node `first` on, naming database `db`: a client
/// given it starts on that node and moves to the next when it fails.
pub fn galera_list(db: &str, first: usize) -> String {
    let (head, mut hosts) = galera_hosts();
    let n = hosts.len();
    hosts.rotate_left(first % n);
    format!("{head}@{}/{db}", hosts.join(","))
}

/// Waits (10 s at most) until a connection to `url` finds its database: DDL made through one
/// Galera node reaches the others a moment later.
pub async fn wait_for_database(url: &str) {
    for _ in 0..200 {
        if let Ok(c) = sqlx::MySqlConnection::connect(url).await {
            c.close().await.ok();
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{url}: the database did not reach this node within 10 s");
}

/// One `#[tokio::test]` per test function on the Galera cluster, in module `galera`.
#[macro_export]
macro_rules! on_galera {
    ($($name:ident),* $(,)?) => {
        $crate::with_servers! {
            mod galera { $( #[tokio::test(flavor = "multi_thread", worker_threads = 4)] async fn $name() { super::$name($crate::Engine::Galera).await } )* }
        }
    };
}

/// [`on_every_backend`] and [`on_galera`]: the tests on SQLite, PostgreSQL, MariaDB and the
/// Galera cluster.
#[macro_export]
macro_rules! on_every_backend_and_galera {
    ($($name:ident),* $(,)?) => {
        $crate::on_every_backend!($($name),*);
        $crate::on_galera!($($name),*);
    };
}

/// One `#[tokio::test]` per backend for each `async fn NAME(engine: Engine)` of the calling
/// module, in modules `sqlite`, `postgres` and `mysql` (so `cargo test postgres::` runs one).
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite { $( #[tokio::test(flavor = "multi_thread", worker_threads = 4)] async fn $name() { super::$name($crate::Engine::Sqlite).await } )* }
        $crate::on_server_backends!($($name),*);
    };
}

/// [`on_every_backend`] for PostgreSQL and MariaDB only (tests of a server and its connections).
#[macro_export]
macro_rules! on_server_backends {
    ($($name:ident),* $(,)?) => {
        $crate::with_servers! {
            mod postgres { $( #[tokio::test(flavor = "multi_thread", worker_threads = 4)] async fn $name() { super::$name($crate::Engine::Postgres).await } )* }
            mod mysql { $( #[tokio::test(flavor = "multi_thread", worker_threads = 4)] async fn $name() { super::$name($crate::Engine::MySql).await } )* }
        }
    };
}

pub struct TestDb {
    pub engine: Engine,
    pub url: String,
    pub client: Arc<Client>,
    name: String,
    /// The server's base URL (PostgreSQL, MariaDB; Galera: its first node's).
    base: String,
    /// Where this test's own connections go (`url`, but one node of a Galera cluster).
    direct: String,
    _dir: tempfile::TempDir,
}

impl TestDb {
    pub async fn new(engine: Engine) -> TestDb {
        let base = match engine {
            Engine::Sqlite => String::new(),
            Engine::Postgres => pg_base(),
            Engine::MySql => my_base(),
            Engine::Galera => return TestDb::new_galera().await,
        };
        TestDb::new_on(engine, &base).await
    }

    /// A test database on the server at `base` (ignored for SQLite), such as the fault
    /// servers of [`pg_fault_base`] and [`my_fault_base`].
    pub async fn new_on(engine: Engine, base: &str) -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("bl_r_{:016x}", rand::random::<u64>());
        let url = match engine {
            Engine::Sqlite => format!("sqlite://{}", dir.path().join("t.db").display()),
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(base)
                    .await
                    .unwrap_or_else(|e| panic!("PostgreSQL is required at {base}: {e}"));
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
                    .execute(&mut c)
                    .await
                    .unwrap();
                format!("{base}?options=-c%20search_path%3D{name}")
            }
            Engine::MySql => {
                let mut c = sqlx::MySqlConnection::connect(base)
                    .await
                    .unwrap_or_else(|e| panic!("MariaDB is required at {base}: {e}"));
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut c)
                    .await
                    .unwrap();
                let mut u = url::Url::parse(base).unwrap();
                u.set_path(&format!("/{name}"));
                u.to_string()
            }
            Engine::Galera => unreachable!("TestDb::new_galera"),
        };
        let client = Client::connect(&url).await.unwrap();
        client.migrate().await.unwrap();
        TestDb {
            engine,
            client: Arc::new(client),
            name,
            base: base.to_owned(),
            direct: url.clone(),
            url,
            _dir: dir,
        }
    }

    /// A test database on the Galera cluster, made through a random node and seen by every
    /// node; `url` lists the nodes from that one on.
    async fn new_galera() -> TestDb {
        let name = format!("bl_r_{:016x}", rand::random::<u64>());
        let first = rand::random::<u32>() as usize % galera_nodes("test", 0).len();
        let base = galera_nodes("test", first).remove(0);
        let mut c = sqlx::MySqlConnection::connect(&base)
            .await
            .unwrap_or_else(|e| panic!("the Galera cluster is required at {base}: {e}"));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut c)
            .await
            .unwrap();
        let nodes = galera_nodes(&name, first);
        for node in &nodes {
            wait_for_database(node).await;
        }
        let url = galera_list(&name, first);
        let client = Client::connect(&url).await.unwrap();
        client.migrate().await.unwrap();
        TestDb {
            engine: Engine::Galera,
            client: Arc::new(client),
            direct: nodes[0].clone(),
            name,
            base,
            url,
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The URL this test's own connections use (`url`, or on Galera the first node's).
    pub fn direct(&self) -> &str {
        &self.direct
    }

    /// The PostgreSQL schema or MariaDB database of this test (empty on SQLite).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs a statement without results on the queue database.
    pub async fn exec(&self, sql: &str) {
        self.try_exec(sql)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    }

    /// Runs `sql` (one or more statements) on a connection of its own; the database's error.
    pub async fn try_exec(&self, sql: &str) -> Result<(), sqlx::Error> {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.engine {
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.direct).await?;
                sqlx::raw_sql(sql).execute(&mut c).await?;
            }
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.direct).await?;
                sqlx::raw_sql(sql).execute(&mut c).await?;
            }
            Engine::MySql | Engine::Galera => {
                let mut c = sqlx::MySqlConnection::connect(&self.direct).await?;
                sqlx::raw_sql(sql).execute(&mut c).await?;
            }
        }
        Ok(())
    }

    /// A query returning one integer.
    pub async fn scalar(&self, sql: &str) -> i64 {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.engine {
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.direct).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
            }
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.direct).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
            }
            Engine::MySql | Engine::Galera => {
                let mut c = sqlx::MySqlConnection::connect(&self.direct).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
            }
        }
    }

    /// A query returning at most one text value.
    pub async fn text(&self, sql: &str) -> Option<String> {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.engine {
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.direct).await.unwrap();
                sqlx::query_scalar(sql)
                    .fetch_optional(&mut c)
                    .await
                    .unwrap()
            }
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.direct).await.unwrap();
                sqlx::query_scalar(sql)
                    .fetch_optional(&mut c)
                    .await
                    .unwrap()
            }
            Engine::MySql | Engine::Galera => {
                let mut c = sqlx::MySqlConnection::connect(&self.direct).await.unwrap();
                sqlx::query_scalar(sql)
                    .fetch_optional(&mut c)
                    .await
                    .unwrap()
            }
        }
    }

    /// Creates the results table the transactional tests write to (no unique constraint:
    /// duplicates must be visible).
    pub async fn create_results(&self) {
        self.exec("CREATE TABLE results (job_id BIGINT NOT NULL)")
            .await;
    }

    /// Every one of the `jobs` jobs of `queue` is completed, with exactly one results row.
    pub async fn assert_each_done_once(&self, queue: &str, jobs: i64) {
        let queue = backlog::QueueName::new(queue).unwrap();
        let stats = self.client.stats(Some(&queue)).await.unwrap();
        assert_eq!(stats[0].1.completed, jobs, "{stats:?}");
        assert_eq!(self.scalar("SELECT COUNT(*) FROM results").await, jobs);
        let distinct = self.scalar("SELECT COUNT(DISTINCT job_id) FROM results");
        assert_eq!(distinct.await, jobs);
        self.assert_counts_match().await;
    }

    /// The counts the database keeps (schema version 19) are a scan's: after processes were
    /// killed mid-transaction, connections cut, servers restarted.
    pub async fn assert_counts_match(&self) {
        let now = self.client.now();
        let backend = self.client.backend();
        let kept = backend.queue_stats(None, now).await.unwrap();
        let scan = backend.queue_stats_scan(None, now).await.unwrap();
        assert_eq!(kept, scan, "the kept counts differ from a scan");
    }

    /// Enqueues jobs `0..n` (the payload is the number) to `queue`, a thousand per statement.
    pub async fn enqueue_numbered(&self, queue: &str, n: i64) {
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let jobs = chunk
                .iter()
                .map(|i| self.client.new_job(queue, i).unwrap())
                .collect();
            self.client.enqueue_many(jobs).await.unwrap();
        }
    }

    pub async fn drop_db(self) {
        self.client.close().await;
        match self.engine {
            Engine::Sqlite => {}
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.base).await.unwrap();
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP SCHEMA {} CASCADE",
                    self.name
                )))
                .execute(&mut c)
                .await
                .unwrap();
            }
            Engine::MySql | Engine::Galera => {
                let mut c = sqlx::MySqlConnection::connect(&self.base).await.unwrap();
                sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {}", self.name)))
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
        }
    }
}

/// Inserts a result row inside a job transaction, in the engine's dialect.
pub async fn insert_result(tx: &mut JobTx, job_id: i64) -> Result<(), sqlx::Error> {
    if let Some(c) = tx.postgres() {
        sqlx::query("INSERT INTO results (job_id) VALUES ($1)")
            .bind(job_id)
            .execute(c)
            .await?;
    } else if let Some(c) = tx.mysql() {
        sqlx::query("INSERT INTO results (job_id) VALUES (?)")
            .bind(job_id)
            .execute(c)
            .await?;
    } else if let Some(c) = tx.sqlite() {
        sqlx::query("INSERT INTO results (job_id) VALUES (?)")
            .bind(job_id)
            .execute(c)
            .await?;
    }
    Ok(())
}

/// A worker running on one queue whose handler counts its runs and completes each job.
pub struct CountingWorker {
    ran: Arc<std::sync::atomic::AtomicU64>,
    shutdown: tokio_util::sync::CancellationToken,
    running: tokio::task::JoinHandle<backlog::Result<backlog::RunReport>>,
}

impl CountingWorker {
    /// Starts it on `queue` with `concurrency` slots.
    pub fn start(client: &Arc<Client>, queue: &str, concurrency: usize) -> CountingWorker {
        Self::start_with(client, queue, concurrency, |_| {})
    }

    /// Starts it on `queue` with `concurrency` slots and the configuration `configure` leaves.
    pub fn start_with(
        client: &Arc<Client>,
        queue: &str,
        concurrency: usize,
        configure: impl FnOnce(&mut backlog::WorkerConfig),
    ) -> CountingWorker {
        let ran = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let worker = backlog::Worker::builder(client.clone())
            .queue(queue, concurrency)
            .fallback_handler({
                let ran = ran.clone();
                move |_: backlog::JobContext| {
                    ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    async { Ok(backlog::Outcome::Complete) }
                }
            })
            .configure(configure)
            .build()
            .expect("a worker");
        let shutdown = tokio_util::sync::CancellationToken::new();
        let running = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { worker.run(shutdown).await }
        });
        CountingWorker {
            ran,
            shutdown,
            running,
        }
    }

    /// Handler runs so far.
    pub fn ran(&self) -> u64 {
        self.ran.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops it and waits for it to end.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.running
            .await
            .expect("the worker's task")
            .expect("the worker");
    }
}

/// Connections idle in the pool of `client`, a PostgreSQL or MySQL one (sqlx pings a connection
/// as it goes back to the pool: a test that stalls the network waits for it to be idle first).
pub fn idle_connections(client: &Client) -> usize {
    match client.sql() {
        Some(SqlBackend::Postgres(pg)) => pg.pool().num_idle(),
        Some(SqlBackend::MySql(my)) => my.pool().num_idle(),
        other => panic!("not a server backend: {other:?}"),
    }
}
