//! Transactions the caller controls: enqueue inside your own transaction (the job exists only if
//! it commits), and complete a job in the same commit as the handler's own writes, fenced by the
//! lease token.

use std::sync::Arc;

use backlog_core::{Backend, EnqueueOutcome, Error, JobCompleteParams, JobRef, NewJob, Result};
use sqlx::{MySql, MySqlConnection, PgConnection, Postgres, Sqlite, SqliteConnection, Transaction};

use crate::dberror::DbResultExt;
use crate::{BackendConfig, MySqlBackend, PgBackend, SqliteBackend, UrlScheme, url_scheme};

/// A connection (usually inside the caller's transaction) that can enqueue and complete jobs.
/// Implemented for `SqliteConnection`, `PgConnection` and `MySqlConnection`, so
/// `&mut *tx` of any sqlx transaction works.
pub trait JobConnection: Send {
    /// Enqueues jobs on this connection (queue rows are created here too). Values are validated
    /// already (see `backlog::Client::enqueue_in`).
    fn backlog_enqueue(
        &mut self,
        jobs: Vec<NewJob>,
        now: i64,
    ) -> impl Future<Output = Result<Vec<EnqueueOutcome>>> + Send;

    /// Completes jobs on this connection, fenced by their tokens; returns those completed.
    fn backlog_complete(
        &mut self,
        params: &JobCompleteParams,
    ) -> impl Future<Output = Result<Vec<JobRef>>> + Send;
}

/// One of the built-in backends, by engine: what transactions are begun on.
#[derive(Debug, Clone)]
pub enum SqlBackend {
    /// SQLite.
    Sqlite(SqliteBackend),
    /// PostgreSQL.
    Postgres(PgBackend),
    /// MySQL or MariaDB.
    MySql(MySqlBackend),
}

impl SqlBackend {
    /// Opens the backend a URL names.
    pub async fn connect(url: &str, config: &BackendConfig) -> Result<Self> {
        Ok(match url_scheme(url)? {
            UrlScheme::Sqlite => SqlBackend::Sqlite(SqliteBackend::connect(url, config).await?),
            UrlScheme::Postgres => SqlBackend::Postgres(PgBackend::connect(url, config).await?),
            UrlScheme::MySql => SqlBackend::MySql(MySqlBackend::connect(url, config).await?),
        })
    }

    /// The backend behind the seam.
    pub fn backend(&self) -> Arc<dyn Backend> {
        match self {
            SqlBackend::Sqlite(b) => Arc::new(b.clone()),
            SqlBackend::Postgres(b) => Arc::new(b.clone()),
            SqlBackend::MySql(b) => Arc::new(b.clone()),
        }
    }

    /// Begins a transaction for a handler's writes and its job's completion.
    pub async fn begin(&self) -> Result<JobTx> {
        Ok(match self {
            SqlBackend::Sqlite(b) => JobTx::Sqlite(b.begin_tx().await?),
            SqlBackend::Postgres(b) => JobTx::Postgres(b.pool().begin().await.db()?),
            SqlBackend::MySql(b) => JobTx::MySql(b.pool().begin().await.db()?),
        })
    }
}

/// An open transaction on one of the built-in backends. Do the handler's writes on the
/// connection (`postgres()`, `mysql()`, `sqlite()`), then [`JobTx::complete`] commits them
/// together with the job's completion, or rolls everything back if the lease was lost.
#[derive(Debug)]
pub enum JobTx {
    /// SQLite (`BEGIN IMMEDIATE`: it holds the database's write lock until it ends).
    Sqlite(Transaction<'static, Sqlite>),
    /// PostgreSQL.
    Postgres(Transaction<'static, Postgres>),
    /// MySQL or MariaDB.
    MySql(Transaction<'static, MySql>),
}

impl JobTx {
    /// The connection, if this is a SQLite transaction.
    pub fn sqlite(&mut self) -> Option<&mut SqliteConnection> {
        match self {
            JobTx::Sqlite(t) => Some(&mut **t),
            _ => None,
        }
    }

    /// The connection, if this is a PostgreSQL transaction.
    pub fn postgres(&mut self) -> Option<&mut PgConnection> {
        match self {
            JobTx::Postgres(t) => Some(&mut **t),
            _ => None,
        }
    }

    /// The connection, if this is a MySQL/MariaDB transaction.
    pub fn mysql(&mut self) -> Option<&mut MySqlConnection> {
        match self {
            JobTx::MySql(t) => Some(&mut **t),
            _ => None,
        }
    }

    /// Enqueues jobs inside this transaction.
    pub async fn enqueue(&mut self, jobs: Vec<NewJob>, now: i64) -> Result<Vec<EnqueueOutcome>> {
        match self {
            JobTx::Sqlite(t) => t.backlog_enqueue(jobs, now).await,
            JobTx::Postgres(t) => t.backlog_enqueue(jobs, now).await,
            JobTx::MySql(t) => t.backlog_enqueue(jobs, now).await,
        }
    }

    /// Completes the jobs and commits. If any job's lease is gone, rolls back everything done
    /// in the transaction and returns `LeaseLost`.
    pub async fn complete(mut self, params: JobCompleteParams) -> Result<()> {
        let done = match &mut self {
            JobTx::Sqlite(t) => t.backlog_complete(&params).await,
            JobTx::Postgres(t) => t.backlog_complete(&params).await,
            JobTx::MySql(t) => t.backlog_complete(&params).await,
        };
        let done = match done {
            Ok(d) => d,
            Err(e) => {
                self.rollback().await.ok();
                return Err(e);
            }
        };
        if let Some(lost) = params.jobs.iter().find(|j| !done.contains(j)) {
            self.rollback().await?;
            return Err(Error::LeaseLost { job_id: lost.id });
        }
        self.commit().await
    }

    /// Commits.
    pub async fn commit(self) -> Result<()> {
        match self {
            JobTx::Sqlite(t) => t.commit().await.db(),
            JobTx::Postgres(t) => t.commit().await.db(),
            JobTx::MySql(t) => t.commit().await.db(),
        }
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<()> {
        match self {
            JobTx::Sqlite(t) => t.rollback().await.db(),
            JobTx::Postgres(t) => t.rollback().await.db(),
            JobTx::MySql(t) => t.rollback().await.db(),
        }
    }
}
