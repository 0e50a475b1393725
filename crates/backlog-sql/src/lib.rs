//! The database backends of backlog: SQLite (embedded default), PostgreSQL, and MySQL 8 / MariaDB.
//!
//! Map:
//! - [`connect`] reads a URL (`sqlite://PATH`, `postgres://…`, `mysql://…`) and returns the
//!   matching [`Backend`](backlog_core::Backend).
//! - [`SqliteBackend`], [`PgBackend`], [`MySqlBackend`]: one implementation of the seam each, with
//!   their SQL in `queries/<dialect>/*.sql` and migrations in `migrations/<dialect>/`.
//! - [`BackendConfig`]: pool sizing.

mod batch;
mod begin;
pub mod catalog;
mod cursor;
mod dberror;
mod deadline;
mod engine;
mod hosts;
mod mysql;
mod pooler;
mod postgres;
mod rows;
mod shared;
mod sqlite;
mod sqltext;
mod tx;

use std::sync::Arc;
use std::time::Duration;

use backlog_core::{Backend, Error, Result};

#[doc(hidden)]
pub use cursor::ClaimCost;
pub use deadline::{Deadline, NoAnswer};
pub use engine::SqlTx;
pub use hosts::rotate_hosts;
pub use mysql::MySqlBackend;
pub use postgres::PgBackend;
pub use sqlite::SqliteBackend;
pub use tx::{JobConnection, JobTx, SqlBackend};

/// The schema version this build creates and expects: the number of its last migration, the same
/// in every dialect.
pub const SCHEMA_VERSION: i64 = 20;

/// Connection pool settings.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// Most connections open at once (SQLite always uses one writer connection).
    pub max_connections: u32,
    /// How long to wait for a connection from the pool (which may have to open one) before
    /// giving up with the transient `DbErrorKind::PoolTimeout`. Callers beyond
    /// `max_connections` queue for this long: the pool is the back-pressure. On SQLite at least
    /// `sqlite_busy_timeout` and a second, which its one writer connection may spend waiting
    /// for another process's lock.
    pub acquire_timeout: Duration,
    /// How long opening a connection (TCP, TLS, handshake, authentication) may take when
    /// connecting.
    pub connect_timeout: Duration,
    /// How long any one call to the database (a statement, or the few of one operation) may go
    /// without an answer before it fails with a transient `DbErrorKind::NoAnswer` error: a
    /// stalled server or network then costs a bounded wait instead of a hang. `None`: wait
    /// forever. Migrations and VACUUM are exempt; see [`Deadline`].
    pub statement_timeout: Option<Duration>,
    /// SQLite: how long a statement waits for another process's lock on the database file
    /// before it fails with a lock timeout ("database is locked").
    pub sqlite_busy_timeout: Duration,
    /// PostgreSQL and MySQL URLs that list several hosts (`h1:p1,h2:p2`): how often the host
    /// in use is checked (a fresh connection that must answer and be ready for writes); when
    /// it fails, new connections go to the next ready host of the list.
    pub host_check_every: Duration,
    /// PostgreSQL: the URL reaches the server through a pooler in transaction pooling mode
    /// (PgBouncer's `pool_mode = transaction`): every statement is unnamed and in a transaction,
    /// and no session state is kept (docs/scaling.md). Also set by the URL parameter
    /// `pooler=transaction`.
    pub pg_transaction_pooler: bool,
    /// PostgreSQL: a URL that reaches the server directly, for the one connection that LISTENs
    /// for new jobs when the main URL goes through a pooler (a pooler hands notifications to
    /// whichever client holds the server connection next). Without it, behind a pooler,
    /// workers poll. Also set by the URL parameter `listen_url=`.
    pub listen_url: Option<String>,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            statement_timeout: Some(Duration::from_secs(30)),
            sqlite_busy_timeout: Duration::from_secs(30),
            host_check_every: Duration::from_millis(500),
            pg_transaction_pooler: false,
            listen_url: None,
        }
    }
}

/// Which engine a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlScheme {
    /// `sqlite://PATH`.
    Sqlite,
    /// `postgres://…` or `postgresql://…`.
    Postgres,
    /// `mysql://…` or `mariadb://…`.
    MySql,
}

/// Reads the scheme of a database URL.
pub fn url_scheme(url: &str) -> Result<UrlScheme> {
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or("");
    match scheme {
        "sqlite" => Ok(UrlScheme::Sqlite),
        "postgres" | "postgresql" => Ok(UrlScheme::Postgres),
        "mysql" | "mariadb" => Ok(UrlScheme::MySql),
        _ => Err(Error::DatabaseUrlInvalid {
            url: redact_url(url),
            reason: "expected sqlite://PATH, postgres://… or mysql://…".into(),
        }),
    }
}

/// Runs `call` with backlog's statements unnamed when `on`: for backlog's calls on a connection
/// of your own that goes through a transaction pooler (`backlog::Client::enqueue_in` does this
/// when its backend is behind one). See `BackendConfig::pg_transaction_pooler`.
pub async fn unnamed_statements<T>(on: bool, call: impl Future<Output = T>) -> T {
    pooler::scope(on, call).await
}

/// The URL with its password replaced by `***`, for messages (also when the URL does not parse).
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The password runs from the first `:` to the last `@`: a password written without
    // percent-encoding may hold `/`, `?`, `#` or `@` itself. (An `@` later in the URL only makes
    // more of it hidden, never less.)
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Opens the backend a URL names. The schema is not touched: call `migrate` for that.
///
/// # Example
/// ```no_run
/// # async fn f() -> backlog_core::Result<()> {
/// let backend = backlog_sql::connect("sqlite://backlog.db", &Default::default()).await?;
/// backend.migrate().await?;
/// # Ok(()) }
/// ```
pub async fn connect(url: &str, config: &BackendConfig) -> Result<Arc<dyn Backend>> {
    let backend = SqlBackend::connect(url, config).await?.backend();
    Ok(Deadline::wrap(backend, config.deadline_for(url)))
}

impl BackendConfig {
    /// The deadline on each call: the statement timeout, and on SQLite at least a second past
    /// the busy timeout (a lock wait then ends with SQLite's own, clearer error).
    pub fn deadline_for(&self, url: &str) -> Option<Duration> {
        let limit = self.statement_timeout?;
        Some(match url_scheme(url) {
            Ok(UrlScheme::Sqlite) => limit.max(self.sqlite_busy_timeout + Duration::from_secs(1)),
            _ => limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(
            redact_url("postgres://u:secret@h:xx/db?x=1"),
            "postgres://u:***@h:xx/db?x=1"
        );
        assert_eq!(redact_url("mysql://root@h/db"), "mysql://root@h/db");
        // Found by tests/parsers.rs: a password with `?`, `/` or `@` was shown whole.
        assert_eq!(redact_url("postgres://a:Zq?Zq@a"), "postgres://a:***@a");
        assert_eq!(redact_url("mysql://a:p/w@d@h/db"), "mysql://a:***@h/db");
        assert_eq!(redact_url("sqlite://backlog.db"), "sqlite://backlog.db");
        assert!(url_scheme("oracle://x").is_err());
        assert_eq!(url_scheme("postgresql://x").unwrap(), UrlScheme::Postgres);
    }

    #[test]
    fn schema_version_is_the_last_migration_of_every_dialect() {
        for migrations in [
            catalog::sqlite::MIGRATIONS,
            catalog::postgres::MIGRATIONS,
            catalog::mysql::MIGRATIONS,
        ] {
            let versions: Vec<i64> = migrations.iter().map(|m| m.version).collect();
            let expected: Vec<i64> = (1..=SCHEMA_VERSION).collect();
            assert_eq!(versions, expected);
        }
    }
}
