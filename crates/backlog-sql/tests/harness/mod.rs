//! Test databases for the conformance suite: a fresh SQLite file, PostgreSQL schema or MySQL
//! database per test, migrated, and dropped again when the test passes; or a fresh
//! `MemoryBackend`.

use std::sync::Arc;
use std::time::Duration;

use backlog_core::{Backend, ClaimStrategy};
use sqlx::Connection;

/// Where PostgreSQL is (required: an unreachable server fails the test).
pub fn postgres_url() -> String {
    std::env::var("BACKLOG_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Where MySQL/MariaDB is (required: an unreachable server fails the test).
pub fn mysql_url() -> String {
    std::env::var("BACKLOG_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// Where PgBouncer in transaction pooling mode is (`scripts/pgbouncer.sh`), in front of the
/// PostgreSQL of [`postgres_url`] (required: an unreachable pooler fails the test).
pub fn pgbouncer_url() -> String {
    std::env::var("BACKLOG_TEST_PGBOUNCER_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:6432/test".into())
}

/// The nodes of the Galera cluster (`scripts/galera.sh`), as one URL listing them (required:
/// an unreachable cluster fails the test).
pub fn galera_url() -> String {
    std::env::var("BACKLOG_TEST_GALERA_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/test".into())
}

/// The user part (`mysql://user`) and the hosts of the Galera cluster's URL.
fn galera_hosts() -> (String, Vec<String>) {
    let all = galera_url();
    let (head, rest) = all.split_once('@').expect("user@hosts");
    let (hosts, _) = rest.split_once('/').expect("hosts/database");
    (
        head.to_owned(),
        hosts.split(',').map(str::to_owned).collect(),
    )
}

/// The Galera cluster's node URLs naming database `db`, in the list's order from node `first`.
fn galera_nodes(db: &str, first: usize) -> Vec<String> {
    let (head, mut hosts) = galera_hosts();
    let n = hosts.len();
    hosts.rotate_left(first % n);
    hosts.iter().map(|h| format!("{head}@{h}/{db}")).collect()
}

/// One URL listing the Galera nodes from node `first` on, naming database `db`: a client
/// given it starts on that node and moves to the next when it fails.
fn galera_list(db: &str, first: usize) -> String {
    let (head, mut hosts) = galera_hosts();
    let n = hosts.len();
    hosts.rotate_left(first % n);
    format!("{head}@{}/{db}", hosts.join(","))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Engine {
    Sqlite,
    Postgres,
    MySql,
    Memory,
}

/// One isolated, migrated database.
pub struct Db {
    pub b: Arc<dyn Backend>,
    /// The in-memory backend (`None` for SQL), for what tests read from the tables directly.
    memory: Option<Arc<backlog_memory::MemoryBackend>>,
    pub url: String,
    pub now: i64,
    pub engine: Engine,
    name: String,
    _dir: Option<Arc<tempfile::TempDir>>,
    /// Galera: the node the next `connect_again` starts on (`None` elsewhere).
    next_node: Option<Arc<std::sync::atomic::AtomicUsize>>,
    /// Through PgBouncer: the URL backends connect with (`url` reaches the database directly,
    /// for the test's own statements).
    pooled_url: Option<String>,
}

fn unique_name() -> String {
    format!("bl_t_{:016x}", rand::random::<u64>())
}

/// `base` with its database path replaced by `db` (for MySQL).
fn with_database(base: &str, db: &str) -> String {
    let mut u = url::Url::parse(base).expect("valid test URL");
    u.set_path(&format!("/{db}"));
    u.to_string()
}

impl Db {
    async fn open(
        engine: Engine,
        url: String,
        name: String,
        dir: Option<Arc<tempfile::TempDir>>,
    ) -> Db {
        let b = backlog_sql::connect(&url, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{engine:?} is required: {e}"));
        b.migrate().await.expect("migrate");
        Db {
            b,
            memory: None,
            url,
            now: backlog_core::now_micros(),
            engine,
            name,
            _dir: dir,
            next_node: None,
            pooled_url: None,
        }
    }

    pub async fn sqlite() -> Db {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        Db::open(Engine::Sqlite, url, String::new(), Some(dir)).await
    }

    pub async fn postgres() -> Db {
        let name = unique_name();
        let mut admin = sqlx::PgConnection::connect(&postgres_url())
            .await
            .expect("PostgreSQL is required");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.ok();
        let sep = if postgres_url().contains('?') {
            '&'
        } else {
            '?'
        };
        let url = format!("{}{sep}options=-c%20search_path%3D{name}", postgres_url());
        Db::open(Engine::Postgres, url, name, None).await
    }

    pub async fn mysql() -> Db {
        let name = unique_name();
        let mut admin = sqlx::MySqlConnection::connect(&mysql_url())
            .await
            .expect("MySQL/MariaDB is required");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.ok();
        Db::open(
            Engine::MySql,
            with_database(&mysql_url(), &name),
            name,
            None,
        )
        .await
    }

    /// A database on the Galera cluster: created through one node (chosen at random) and seen
    /// by every node before the test starts; the backend lists the nodes starting with that
    /// one, and each `connect_again` starts on the next node. `url` is that first node's (for
    /// direct connections); the engine is MySQL's.
    pub async fn galera() -> Db {
        let name = unique_name();
        let first = rand::random::<u32>() as usize % galera_nodes("test", 0).len();
        let mut admin = sqlx::MySqlConnection::connect(&galera_nodes("test", first)[0])
            .await
            .expect("the Galera cluster is required (scripts/galera.sh ensure)");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.ok();
        let nodes = galera_nodes(&name, first);
        for node in &nodes {
            wait_for_database(node).await;
        }
        let mut db = Db::open(Engine::MySql, galera_list(&name, first), name.clone(), None).await;
        db.url = nodes[0].clone();
        db.next_node = Some(Arc::new((first + 1).into()));
        db
    }

    /// A database of its own on PostgreSQL, reached through PgBouncer in transaction pooling
    /// mode (`pooler=transaction`), with LISTEN on a direct connection. (Not a schema, as for
    /// PostgreSQL: the pooler drops the `options` that would set the search path.) `url` is the
    /// direct one.
    pub async fn pgbouncer() -> Db {
        let name = unique_name();
        let mut admin = sqlx::PgConnection::connect(&postgres_url())
            .await
            .expect("PostgreSQL is required");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.ok();
        let direct = with_database(&postgres_url(), &name);
        let pooled = format!(
            "{}?pooler=transaction&listen_url={direct}",
            with_database(&pgbouncer_url(), &name)
        );
        let mut db = Db::open(Engine::Postgres, pooled.clone(), name, None).await;
        db.url = direct;
        db.pooled_url = Some(pooled);
        db
    }

    pub async fn memory() -> Db {
        let memory = Arc::new(backlog_memory::MemoryBackend::new());
        memory.migrate().await.expect("migrate");
        Db {
            b: memory.clone(),
            memory: Some(memory),
            url: "memory".into(),
            now: backlog_core::now_micros(),
            engine: Engine::Memory,
            name: String::new(),
            _dir: None,
            next_node: None,
            pooled_url: None,
        }
    }

    /// Another handle on the same database, as another process would open it: a new connection
    /// pool for SQL, the backend itself for memory (its data lives in that one value).
    pub async fn connect_again(&self) -> Arc<dyn Backend> {
        match self.engine {
            Engine::Memory => self.b.clone(),
            _ => {
                let url = match (&self.next_node, &self.pooled_url) {
                    (Some(next), _) => galera_list(
                        &self.name,
                        next.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    ),
                    (None, Some(pooled)) => pooled.clone(),
                    (None, None) => self.url.clone(),
                };
                backlog_sql::connect(&url, &Default::default())
                    .await
                    .unwrap()
            }
        }
    }

    /// The backend's default claim strategy.
    pub fn strategy(&self) -> ClaimStrategy {
        self.b.capabilities().default_strategy()
    }

    /// Every claim strategy the backend supports (the claim-token one included everywhere).
    pub fn strategies(&self) -> Vec<ClaimStrategy> {
        self.b.capabilities().strategies()
    }

    /// Runs SQL text as a program in another language would (SQL backends only).
    #[allow(dead_code)] // used by one of the suites that share this harness
    pub async fn exec_sql(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.engine {
            Engine::Memory => panic!("the in-memory backend runs no SQL"),
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
            }
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
            }
            Engine::MySql => {
                let url = match self.next_node {
                    Some(_) => galera_nodes(&self.name, 0).remove(0),
                    None => self.url.clone(),
                };
                let mut c = sqlx::MySqlConnection::connect(&url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
            }
        }
    }

    /// How many available jobs of `queue` lie on each shard, where claims are sharded
    /// (PostgreSQL, MySQL); `None` where claims keep one head whatever the queue's `shards`.
    #[allow(dead_code)] // used by one of the suites that share this harness
    pub async fn shard_counts(&self, queue: &str) -> Option<std::collections::BTreeMap<i16, i64>> {
        let sql = "SELECT shard, count(*) FROM backlog_job WHERE queue = {q} AND state = 'available' \
                   GROUP BY shard";
        let rows: Vec<(i16, i64)> = match self.engine {
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_as(sqlx::AssertSqlSafe(sql.replace("{q}", "$1")))
                    .bind(queue)
                    .fetch_all(&mut c)
                    .await
                    .unwrap()
            }
            Engine::MySql => {
                let url = match self.next_node {
                    Some(_) => galera_nodes(&self.name, 0).remove(0),
                    None => self.url.clone(),
                };
                let mut c = sqlx::MySqlConnection::connect(&url).await.unwrap();
                if self.next_node.is_some() {
                    // What other nodes committed, applied here before the read.
                    sqlx::raw_sql("SET SESSION wsrep_sync_wait = 1")
                        .execute(&mut c)
                        .await
                        .unwrap();
                }
                sqlx::query_as(sqlx::AssertSqlSafe(sql.replace("{q}", "?")))
                    .bind(queue)
                    .fetch_all(&mut c)
                    .await
                    .unwrap()
            }
            Engine::Sqlite | Engine::Memory => return None,
        };
        Some(rows.into_iter().collect())
    }

    /// The state of a job in the archive table, if it is there.
    pub async fn archived(&self, id: i64) -> Option<String> {
        match self.engine {
            Engine::Memory => self
                .memory
                .as_ref()
                .and_then(|m| m.archived(id))
                .map(|job| job.state.as_str().to_owned()),
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar("SELECT state FROM backlog_job_archive WHERE id = ?")
                    .bind(id)
                    .fetch_optional(&mut c)
                    .await
                    .unwrap()
            }
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar("SELECT state FROM backlog_job_archive WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&mut c)
                    .await
                    .unwrap()
            }
            Engine::MySql => {
                let mut c = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar("SELECT state FROM backlog_job_archive WHERE id = ?")
                    .bind(id)
                    .fetch_optional(&mut c)
                    .await
                    .unwrap()
            }
        }
    }

    /// What to drop once the test passed.
    pub fn cleanup(&self) -> Cleanup {
        Cleanup {
            engine: self.engine,
            name: self.name.clone(),
            b: self.b.clone(),
            server: match self.next_node {
                Some(_) => self.url.clone(),
                None => mysql_url(),
            },
            database: self.pooled_url.is_some(),
        }
    }
}

pub struct Cleanup {
    engine: Engine,
    name: String,
    b: Arc<dyn Backend>,
    /// The MySQL server (or Galera node) to drop the database through.
    server: String,
    /// PostgreSQL: the test has a database of its own (not a schema).
    database: bool,
}

impl Cleanup {
    pub async fn run(self) {
        self.b.close().await;
        match self.engine {
            Engine::Sqlite | Engine::Memory => {}
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&postgres_url()).await.unwrap();
                // FORCE: the pooler may still hold server connections to it.
                let drop = match self.database {
                    true => format!("DROP DATABASE {} WITH (FORCE)", self.name),
                    false => format!("DROP SCHEMA {} CASCADE", self.name),
                };
                sqlx::query(sqlx::AssertSqlSafe(drop))
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
            Engine::MySql => {
                let mut c = sqlx::MySqlConnection::connect(&self.server).await.unwrap();
                sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {}", self.name)))
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
        }
    }
}

/// Waits (10 s at most) until a connection to `url` finds its database: DDL made through one
/// Galera node reaches the others a moment later.
async fn wait_for_database(url: &str) {
    for _ in 0..200 {
        if let Ok(c) = sqlx::MySqlConnection::connect(url).await {
            c.close().await.ok();
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{url}: the database did not reach this node within 10 s");
}

pub fn strategy_name(s: ClaimStrategy) -> &'static str {
    match s {
        ClaimStrategy::SkipLocked => "skiplocked",
        ClaimStrategy::SingleWriter => "singlewriter",
        ClaimStrategy::ClaimToken => "token",
    }
}

/// Generates one test per backend for each named suite function; those after an optional
/// `; sql_only:` test features of the SQL backends alone and are not run against memory.
macro_rules! conformance {
    ($($name:ident),* $(,)? $(; sql_only: $($sql:ident),* $(,)?)?) => {
        $crate::harness::conformance!(@sql sqlite, $($name,)* $($($sql,)*)?);
        #[cfg(feature = "servers")]
        $crate::harness::conformance!(@sql postgres, $($name,)* $($($sql,)*)?);
        #[cfg(feature = "servers")]
        $crate::harness::conformance!(@sql mysql, $($name,)* $($($sql,)*)?);
        #[cfg(feature = "servers")]
        $crate::harness::conformance!(@sql galera, $($name,)* $($($sql,)*)?);
        #[cfg(feature = "servers")]
        $crate::harness::conformance!(@sql pgbouncer, $($name,)* $($($sql,)*)?);
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::harness::Db::memory().await).await;
                }
            )*
        }
    };
    (@sql $engine:ident, $($name:ident,)*) => {
        mod $engine {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let db = crate::harness::Db::$engine().await;
                    let cleanup = db.cleanup();
                    super::$name(db).await;
                    cleanup.run().await;
                }
            )*
        }
    };
}
pub(crate) use conformance;
