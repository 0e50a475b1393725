//! Transactions the caller controls: enqueue inside your own transaction (the job exists only if
//! it commits), and complete a job in the same commit as the handler's own writes, fenced by the
//! lease token.

use std::sync::Arc;

use backlog_core::{
    Backend, BackendTx, EnqueueOutcome, Error, JobCompleteParams, JobRef, NewJob, Result,
};
use sqlx::{MySql, MySqlConnection, PgConnection, Postgres, Sqlite, SqliteConnection};

use crate::engine::SqlTx;
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
        let scheme = url_scheme(url)?;
        if scheme != UrlScheme::Postgres {
            let (_, params) = crate::pooler::take_url_params(url)?;
            if params != Default::default()
                || config.pg_transaction_pooler
                || config.listen_url.is_some()
            {
                return Err(Error::DatabaseUrlInvalid {
                    url: crate::redact_url(url),
                    reason: "pooler and listen_url are settings of PostgreSQL URLs (a pooler in \
                             transaction pooling mode, such as PgBouncer)"
                        .into(),
                });
            }
        }
        Ok(match scheme {
            UrlScheme::Sqlite => SqlBackend::Sqlite(SqliteBackend::connect(url, config).await?),
            UrlScheme::Postgres => SqlBackend::Postgres(PgBackend::connect(url, config).await?),
            UrlScheme::MySql => SqlBackend::MySql(MySqlBackend::connect(url, config).await?),
        })
    }

    /// The backend behind the seam.
    pub fn backend(&self) -> Arc<dyn Backend> {
        match self {
            SqlBackend::Sqlite(b) => Arc::new(b.clone()),
            // Behind a transaction pooler, framed so that each call's statements are unnamed.
            SqlBackend::Postgres(b) => crate::Deadline::wrap(Arc::new(b.clone()), None),
            SqlBackend::MySql(b) => Arc::new(b.clone()),
        }
    }

    /// The built-in backend behind a `dyn Backend`, if it is one.
    pub fn of(backend: &dyn Backend) -> Option<Self> {
        let any = backend.as_any();
        if let Some(d) = any.downcast_ref::<crate::Deadline>() {
            Self::of(d.inner())
        } else if let Some(b) = any.downcast_ref::<SqliteBackend>() {
            Some(SqlBackend::Sqlite(b.clone()))
        } else if let Some(b) = any.downcast_ref::<PgBackend>() {
            Some(SqlBackend::Postgres(b.clone()))
        } else {
            any.downcast_ref::<MySqlBackend>()
                .map(|b| SqlBackend::MySql(b.clone()))
        }
    }
}

/// An open transaction, begun by any backend's [`Backend::begin`]. Do the handler's writes on
/// the connection (`postgres()`, `mysql()`, `sqlite()` on the built-in backends), then
/// [`JobTx::complete`] commits them together with the job's completion, or rolls everything
/// back if the lease was lost. On SQLite it is `BEGIN IMMEDIATE`: it holds the database's write
/// lock until it ends.
pub struct JobTx(Box<dyn BackendTx>);

impl std::fmt::Debug for JobTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobTx").finish_non_exhaustive()
    }
}

impl JobTx {
    /// Begins a transaction on `backend`; `Unsupported` if it has none.
    pub async fn begin(backend: &dyn Backend) -> Result<Self> {
        Ok(JobTx(backend.begin().await?))
    }

    /// The connection, if this is a SQLite transaction.
    pub fn sqlite(&mut self) -> Option<&mut SqliteConnection> {
        self.conn::<Sqlite>()
    }

    /// The connection, if this is a PostgreSQL transaction.
    pub fn postgres(&mut self) -> Option<&mut PgConnection> {
        self.conn::<Postgres>()
    }

    /// The connection, if this is a MySQL/MariaDB transaction.
    pub fn mysql(&mut self) -> Option<&mut MySqlConnection> {
        self.conn::<MySql>()
    }

    fn conn<DB: sqlx::Database>(&mut self) -> Option<&mut DB::Connection> {
        let tx = self.0.as_any_mut().downcast_mut::<SqlTx<DB>>()?;
        Some(tx.conn())
    }

    /// The backend's own transaction, for a backend that is not one of the built-in ones.
    pub fn backend_tx(&mut self) -> &mut dyn BackendTx {
        &mut *self.0
    }

    /// Enqueues jobs inside this transaction.
    pub async fn enqueue(&mut self, jobs: Vec<NewJob>, now: i64) -> Result<Vec<EnqueueOutcome>> {
        self.0.enqueue(jobs, now).await
    }

    /// Completes the jobs and commits. If any job's lease is gone, rolls back everything done
    /// in the transaction and returns `LeaseLost`.
    pub async fn complete(mut self, params: JobCompleteParams) -> Result<()> {
        let done = match self.0.complete(&params).await {
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
        self.0.commit().await
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<()> {
        self.0.rollback().await
    }
}
