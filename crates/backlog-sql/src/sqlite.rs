//! SQLite: the embedded default. One writer connection (SQLite has a single writer anyway, and
//! queueing in the pool beats sleeping in the busy handler); WAL with `synchronous = FULL` so an
//! acknowledged job survives power loss.

use std::str::FromStr;
use std::time::Duration;

use backlog_core::{
    BackendTx, Capabilities, ClaimedJob, CompleteClaimed, CronFireParams, EnqueueOutcome, Error,
    GroupPromoteParams, JobClaimParams, JobCompleteClaimParams, JobCompleteParams,
    JobCountPendingParams, JobHeartbeatParams, JobInsertParams, JobPruneParams, JobRef,
    MigrateReport, NewJob, Ordering, Result, Retention, TxClaim,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, Row, Sqlite, SqliteConnection, SqlitePool};

use crate::BackendConfig;
use crate::batch::{self, Deduped, INSERT_CHUNK};
use crate::catalog::{Stmt, sqlite as cat};
use crate::dberror::{DbResultExt, connect_error};
use crate::engine::{Dialect, SqlTx};
use crate::rows::{
    assign_ids, audit_from_row, claimed_from_row, created, job_from_row, queue_from_row,
    stat_from_row,
};
use crate::shared::{self, Tokens};

/// A completion's jobs as SQLite's statements take them: JSON, the (id, token) pairs
/// (`job_complete_*`), or the ids alone when they share one token (`job_complete_*_one`, which
/// take the token as their last parameter).
struct CompletionArgs {
    tokens: Tokens,
    jobs: String,
}

impl CompletionArgs {
    fn of(jobs: &[JobRef]) -> Self {
        let tokens = Tokens::of(jobs);
        let jobs = match &tokens {
            Tokens::One(_) => serde_json::to_string(&jobs.iter().map(|j| j.id).collect::<Vec<_>>()),
            Tokens::Each(_) => {
                serde_json::to_string(&jobs.iter().map(|j| [j.id, j.token]).collect::<Vec<_>>())
            }
        };
        CompletionArgs {
            tokens,
            jobs: jobs.expect("integers serialize"),
        }
    }

    /// The delete, returning the ids it deleted (`read`) or not.
    fn delete(&self, read: bool) -> Stmt<Sqlite> {
        let jobs = self.jobs.as_str();
        match (&self.tokens, read) {
            (Tokens::Each(_), true) => cat::job_complete_delete(jobs),
            (Tokens::Each(_), false) => cat::job_complete_delete_unread(jobs),
            (Tokens::One(t), true) => cat::job_complete_delete_one(jobs, *t),
            (Tokens::One(t), false) => cat::job_complete_delete_one_unread(jobs, *t),
        }
    }

    /// The update to completed (retention keep), returning the ids it updated (`read`) or not.
    fn keep(&self, now: i64, read: bool) -> Stmt<Sqlite> {
        let jobs = self.jobs.as_str();
        match (&self.tokens, read) {
            (Tokens::Each(_), true) => cat::job_complete_keep(jobs, now),
            (Tokens::Each(_), false) => cat::job_complete_keep_unread(jobs, now),
            (Tokens::One(t), true) => cat::job_complete_keep_one(jobs, now, *t),
            (Tokens::One(t), false) => cat::job_complete_keep_one_unread(jobs, now, *t),
        }
    }

    /// The copy into the archive, which [`Self::delete`] follows.
    fn archive(&self, now: i64) -> Stmt<Sqlite> {
        let jobs = self.jobs.as_str();
        match &self.tokens {
            Tokens::Each(_) => cat::job_complete_archive(jobs, now),
            Tokens::One(t) => cat::job_complete_archive_one(jobs, now, *t),
        }
    }
}

/// The SQLite backend.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    pool: SqlitePool,
    /// Connections for transactions the caller controls (job transactions), apart from the
    /// writer connection so that heartbeats and claims are not queued behind them.
    tx_pool: SqlitePool,
}

impl SqliteBackend {
    /// Begins a transaction (the name the shared backend code uses for every dialect; see
    /// `PgBackend::tx`).
    pub(crate) async fn tx(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.pool.begin().await
    }

    /// Opens (creating if missing) the database file a `sqlite://PATH` URL names.
    pub async fn connect(url: &str, config: &BackendConfig) -> Result<Self> {
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| connect_error(url, e))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            // A job cancelled because its parent failed cancels its own children in turn: the
            // trigger that does it fires again for the rows it changes (schema version 20).
            .pragma("recursive_triggers", "ON")
            .busy_timeout(config.sqlite_busy_timeout);
        // The one writer connection may itself wait out the busy timeout on another process's
        // lock: a caller queued behind it waits at least that long before it gives up.
        let acquire = config
            .acquire_timeout
            .max(config.sqlite_busy_timeout + Duration::from_secs(1));
        let pool = pool_options()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(acquire)
            .connect_with(opts.clone())
            .await
            .map_err(|e| connect_error(url, e))?;
        if !asks_read_only(url)
            && let Err(e) = check_writable(&pool).await
        {
            pool.close().await;
            return Err(connect_error(url, e));
        }
        let tx_pool = pool_options()
            .max_connections(8)
            .acquire_timeout(acquire)
            .connect_lazy_with(opts);
        let mut b = Self::from_pool(pool);
        b.tx_pool = tx_pool;
        Ok(b)
    }

    /// Uses an existing pool (the caller's own sqlx pool).
    pub fn from_pool(pool: SqlitePool) -> Self {
        SqliteBackend {
            tx_pool: pool.clone(),
            pool,
        }
    }

    /// The pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Begins an immediate (write-locking) transaction for a handler's writes.
    pub(crate) async fn begin_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.tx_pool.begin_with("BEGIN IMMEDIATE").await.db()
    }
}

/// The options of the pools `connect` makes: a connection that still counts a transaction open
/// is closed instead of handed out. sqlx counts a transaction ended only once its ROLLBACK
/// succeeds, and after a COMMIT that failed on a disk error SQLite has rolled back already, so
/// the ROLLBACK sent when the transaction is dropped fails and the connection came back to the
/// pool counting one open: every later `BEGIN IMMEDIATE` on it failed with "attempted to call
/// begin_with at non-zero transaction depth" instead of the disk's own error. The count is final
/// by the time a connection is acquired: the pool's ping on release runs the queued ROLLBACK.
fn pool_options() -> SqlitePoolOptions {
    SqlitePoolOptions::new().before_acquire(|conn, _| {
        let open = sqlx::Connection::is_in_transaction(conn);
        Box::pin(async move { Ok(!open) })
    })
}

/// True when the URL opens the database to read only (`mode=ro`, or `immutable` for read-only
/// media): then the client is not expected to write.
fn asks_read_only(url: &str) -> bool {
    let Some((_, query)) = url.split_once('?') else {
        return false;
    };
    url::form_urlencoded::parse(query.as_bytes()).any(|(key, value)| match &*key {
        "mode" => value == "ro",
        "immutable" => value == "true" || value == "1",
        _ => false,
    })
}

/// Fails when the connection cannot write. SQLite opens a file it may not write (a read-only
/// mount, no permission) for reading instead, without an error, and the connection stays
/// read-only for good: a client that connected then failed every write with "attempt to write
/// a readonly database", even once the file system was writable again, until it was restarted.
///
/// The probe is a write rolled back (`BEGIN IMMEDIATE` is no test: on a read-only connection it
/// begins a read). A read-only connection refuses it before taking the write lock; with the busy
/// timeout at zero, a lock that another connection holds ("busy") is an answer too, as only a
/// connection that can write asks for it. The probe runs on a connection of its own, made with
/// the pool's options, so the pool's connections keep their busy timeout. Nothing reaches the
/// file: the rollback drops the page.
async fn check_writable(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let opts = (*pool.connect_options())
        .clone()
        .busy_timeout(Duration::ZERO);
    let mut conn = sqlx::ConnectOptions::connect(&opts).await?;
    let mut tx = conn.begin().await?;
    let probe = sqlx::raw_sql(cat::DB_WRITE_PROBE).execute(&mut *tx).await;
    // After some failures SQLite has rolled back already: the probe's error is the answer then.
    let rolled_back = tx.rollback().await;
    let _ = conn.close().await;
    match probe {
        Ok(_) => rolled_back,
        Err(sqlx::Error::Database(e)) if crate::dberror::sqlite_code(&*e) == Some(5) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection whose transaction sqlx could not roll back (SQLite had ended it already, as
    /// after a COMMIT that failed on a disk error) is not handed out again: the next write
    /// transaction begins on a fresh connection, on the writer pool and on the job pool alike.
    #[tokio::test]
    async fn a_connection_left_counting_a_transaction_is_not_handed_out() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let b = SqliteBackend::connect(&url, &BackendConfig::default())
            .await
            .unwrap();
        for pool in [&b.pool, &b.tx_pool] {
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
            // SQLite's transaction ends here; sqlx's ROLLBACK at the drop below then fails.
            sqlx::raw_sql("ROLLBACK").execute(&mut *tx).await.unwrap();
            drop(tx);
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
            sqlx::raw_sql("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
    }

    #[test]
    fn read_only_urls() {
        assert!(!asks_read_only("sqlite:///var/lib/q.db"));
        assert!(!asks_read_only("sqlite:///var/lib/q.db?mode=rwc"));
        assert!(!asks_read_only("sqlite:///var/lib/q.db?immutable=false"));
        assert!(asks_read_only("sqlite:///var/lib/q.db?mode=ro"));
        assert!(asks_read_only(
            "sqlite:///var/lib/q.db?cache=private&immutable=1"
        ));
        assert!(asks_read_only("sqlite:q.db?immutable=true"));
    }

    /// The probe on a connection that may not write (`query_only` refuses writes with the same
    /// SQLITE_READONLY as a read-only file) fails; on one that may, it passes, also while
    /// another connection holds the write lock, at once; it leaves the busy timeout as set and the
    /// file as it was.
    #[tokio::test]
    async fn the_probe_tells_read_only_connections() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("p.db").display());
        let opts = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_millis(1234));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts.clone())
            .await
            .unwrap();
        sqlx::raw_sql("PRAGMA user_version = 7")
            .execute(&pool)
            .await
            .unwrap();
        check_writable(&pool).await.unwrap();
        let mut holder = SqliteConnection::connect_with(&opts).await.unwrap();
        sqlx::raw_sql("BEGIN IMMEDIATE")
            .execute(&mut holder)
            .await
            .unwrap();
        let started = std::time::Instant::now();
        check_writable(&pool).await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(500));
        let timeout: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(timeout, 1234);
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut holder)
            .await
            .unwrap();
        let read_only = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts.clone().read_only(true))
            .await
            .unwrap();
        let err = check_writable(&read_only).await.unwrap_err();
        let sqlx::Error::Database(e) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(crate::dberror::sqlite_code(&**e), Some(8), "{err}");
        let version: i64 = sqlx::query_scalar("PRAGMA user_version")
            .fetch_one(&mut holder)
            .await
            .unwrap();
        assert_eq!(version, 7, "the probe changed the file");
    }
}

struct Inserter<'c> {
    conn: &'c mut SqliteConnection,
    now: i64,
}

impl batch::InsertOps for Inserter<'_> {
    async fn insert(&mut self, rows: &[NewJob]) -> Result<Vec<Option<i64>>> {
        let (conn, now) = (&mut *self.conn, self.now);
        let mut out = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(INSERT_CHUNK) {
            if let [first, ..] = chunk
                && chunk.len() > 1
                && batch::uniform(chunk)
            {
                let payloads: Vec<&str> = chunk.iter().map(|j| j.payload.as_str()).collect();
                let payloads = serde_json::to_string(&payloads).expect("strings serialize");
                let last = cat::job_insert_uniform(
                    first.queue.as_str(),
                    first.kind.as_ref().map(|k| k.as_str()),
                    first.priority,
                    first.run_at.unwrap_or(now),
                    first.max_attempts,
                    now,
                    payloads,
                    first.trace_context.as_ref().map(|t| t.to_json()),
                )
                .query()
                .execute(&mut *conn)
                .await
                .db()?
                .last_insert_rowid();
                let first = last - chunk.len() as i64 + 1;
                out.extend((first..=last).map(Some));
                continue;
            }
            // Each row's values in column order: queue, kind, payload, priority, run_at,
            // max_attempts, trace_context, then unique_key (job_insert only) and created_at.
            if chunk.iter().all(|j| j.unique_key.is_none()) {
                let values: Vec<_> = chunk
                    .iter()
                    .map(|j| {
                        (
                            j.queue.as_str(),
                            j.kind.as_ref().map(|k| k.as_str()),
                            j.payload.as_str(),
                            j.priority,
                            j.run_at.unwrap_or(now),
                            j.max_attempts,
                            j.trace_context.as_ref().map(|t| t.to_json()),
                            now,
                        )
                    })
                    .collect();
                let last = cat::job_insert_plain(&values)
                    .query()
                    .execute(&mut *conn)
                    .await
                    .db()?
                    .last_insert_rowid();
                let first = last - chunk.len() as i64 + 1;
                out.extend((first..=last).map(Some));
                continue;
            }
            let values: Vec<_> = chunk
                .iter()
                .map(|j| {
                    (
                        j.queue.as_str(),
                        j.kind.as_ref().map(|k| k.as_str()),
                        j.payload.as_str(),
                        j.priority,
                        j.run_at.unwrap_or(now),
                        j.max_attempts,
                        j.trace_context.as_ref().map(|t| t.to_json()),
                        j.unique_key.as_ref().map(|k| k.as_str()),
                        now,
                    )
                })
                .collect();
            let rows = cat::job_insert(&values)
                .as_()
                .fetch_all(&mut *conn)
                .await
                .db()?;
            out.extend(assign_ids(&created(rows), &Deduped::slots(chunk)));
        }
        Ok(out)
    }

    async fn find(&mut self, job: &NewJob) -> Result<Option<i64>> {
        crate::engine::ConnOps::find_unique(&mut *self.conn, job).await
    }
}

impl SqliteBackend {
    /// A claim on `conn` (the claim-token strategy's two statements want a transaction around
    /// them, which the caller opens).
    async fn claim_on(
        &self,
        conn: &mut SqliteConnection,
        p: &JobClaimParams,
    ) -> Result<Vec<ClaimedJob>> {
        let token = shared::new_token();
        let expires = p.now + p.lease.as_micros() as i64;
        let mut limit = i64::from(p.limit);
        let mut limits = None;
        if p.global_limit {
            // In the caller's write transaction: nobody else claims meanwhile.
            let (l, room) = crate::engine::limited_room!(cat, conn, p);
            limit = room;
            limits = Some(l);
            if limit == 0 {
                return Ok(vec![]);
            }
        }
        let (queue, kinds) = (p.queue.as_str(), shared::kinds_json(&p.kinds));
        let mut jobs = if p.global_limit {
            let claim = match p.order {
                Ordering::Fifo => cat::job_claim_limited_fifo,
                Ordering::Lifo => cat::job_claim_limited_lifo,
            };
            let rows = claim(token, &p.owner, expires, p.now, queue, kinds, limit)
                .query()
                .fetch_all(&mut *conn)
                .await
                .db()?;
            rows.iter()
                .map(|r| Ok(claimed_from_row!(r, 0, p, token, expires)))
                .collect::<Result<Vec<_>>>()?
        } else {
            // Every strategy the same way here: one command of two statements, the rows
            // marked with the claim's token and read back as one row (`job_claim_json_fifo.sql`
            // says why), in the caller's transaction. The one writer means no other claim can
            // take them meanwhile.
            let claim = match p.order {
                Ordering::Fifo => cat::job_claim_json_fifo,
                Ordering::Lifo => cat::job_claim_json_lifo,
            };
            let text: String = claim(token, &p.owner, expires, p.now, queue, kinds, limit)
                .scalar()
                .fetch_one(&mut *conn)
                .await
                .db()?;
            crate::rows::claimed_from_json(&text, queue, token, expires)?
        };
        if let Some(l) = limits {
            crate::engine::store_bucket!(cat, conn, p, l, jobs.len());
            let groups = jobs.iter().filter_map(|j| j.group.clone()).collect();
            crate::engine::store_group_starts!(cat, conn, p, l, groups, |g| &shared::json_list(&g));
        }
        crate::rows::sort_claimed(&mut jobs, p.order);
        Ok(jobs)
    }

    async fn complete_on(
        conn: &mut SqliteConnection,
        p: &JobCompleteParams,
    ) -> Result<Vec<JobRef>> {
        if p.jobs.is_empty() {
            return Ok(vec![]);
        }
        let args = CompletionArgs::of(&p.jobs);
        let read = |rows: Vec<sqlx::sqlite::SqliteRow>| {
            rows.iter()
                .map(|r| r.try_get::<i64, _>(0).db())
                .collect::<Result<Vec<i64>>>()
        };
        let ids: Vec<i64> = match p.retention {
            Retention::Delete => read(args.delete(true).query().fetch_all(conn).await.db()?)?,
            Retention::Keep => read(args.keep(p.now, true).query().fetch_all(conn).await.db()?)?,
            Retention::Archive => {
                args.archive(p.now)
                    .query()
                    .fetch_all(&mut *conn)
                    .await
                    .db()?;
                read(args.delete(true).query().fetch_all(conn).await.db()?)?
            }
        };
        Ok(shared::refs_with_ids(&p.jobs, &ids))
    }

    /// Completes `p`'s jobs (retention delete or keep) without reading back which were: every
    /// one (`Some`), or fewer (`None`: some had lost their lease), and then the caller rolls
    /// back and completes them with [`Self::complete_on`], which tells which. Reading the ids
    /// back (`RETURNING`) costs CPU on every completion, and a lost lease is rare (figures in
    /// docs/bench-journal/figures-behind-the-code.md).
    async fn complete_all_on(
        conn: &mut SqliteConnection,
        p: &JobCompleteParams,
    ) -> Result<Option<Vec<JobRef>>> {
        let args = CompletionArgs::of(&p.jobs);
        let stmt = match p.retention {
            Retention::Delete => args.delete(false),
            Retention::Keep => args.keep(p.now, false),
            // Archiving reads back what it moved; the caller does not come here for it.
            Retention::Archive => return Ok(None),
        };
        let n = stmt.query().execute(conn).await.db()?;
        Ok((n.rows_affected() == p.jobs.len() as u64).then(|| p.jobs.clone()))
    }

    /// Completes (deletes) `p`'s finished jobs, which share the lease token `token` (`ids`:
    /// their ids as JSON), and claims the next in one command, in the caller's write
    /// transaction: `None` when some had lost their lease, and the caller then rolls back.
    async fn complete_claim_on(
        conn: &mut SqliteConnection,
        p: &JobCompleteClaimParams,
        ids: &str,
        token: i64,
    ) -> Result<Option<CompleteClaimed>> {
        let c = &p.claim;
        let (claim_token, expires) = (shared::new_token(), c.now + c.lease.as_micros() as i64);
        let (queue, kinds, limit) = (c.queue.as_str(), shared::kinds_json(&c.kinds), c.limit);
        let stmt = match c.order {
            Ordering::Fifo => cat::job_complete_claim_fifo,
            Ordering::Lifo => cat::job_complete_claim_lifo,
        };
        let (owner, limit) = (c.owner.as_str(), i64::from(limit));
        let stmt = stmt(
            claim_token,
            owner,
            expires,
            c.now,
            queue,
            kinds,
            limit,
            ids,
            token,
        );
        let (deleted, text): (i64, String) = stmt.as_().fetch_one(&mut *conn).await.db()?;
        if deleted != p.complete.jobs.len() as i64 {
            return Ok(None);
        }
        let mut claimed = crate::rows::claimed_from_json(&text, queue, claim_token, expires)?;
        crate::rows::sort_claimed(&mut claimed, c.order);
        Ok(Some(CompleteClaimed {
            completed: p.complete.jobs.clone(),
            claimed: Ok(claimed),
            promoted: 0,
        }))
    }

    /// `job_handoff.sql` for a worker's finished jobs, in the caller's write transaction: the
    /// next jobs of their groups, claimed under a new lease.
    async fn hand_off(
        conn: &mut SqliteConnection,
        p: &JobCompleteClaimParams,
    ) -> Result<Vec<ClaimedJob>> {
        let c = &p.claim;
        let (token, expires) = (shared::new_token(), c.now + c.lease.as_micros() as i64);
        let pairs: Vec<[i64; 2]> = p.complete.jobs.iter().map(|j| [j.id, j.token]).collect();
        let pairs = serde_json::to_string(&pairs).expect("integers serialize");
        let kinds = shared::kinds_json(&c.kinds);
        let (queue, limit) = (c.queue.as_str(), i64::from(c.limit));
        let rows = cat::job_handoff(token, &c.owner, expires, c.now, queue, kinds, limit, &pairs)
            .query()
            .fetch_all(&mut *conn)
            .await
            .db()?;
        rows.iter()
            .map(|r| Ok(claimed_from_row!(r, 0, c, token, expires)))
            .collect()
    }
}

impl Dialect for SqliteBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            skip_locked: false,
            single_writer: true,
            few_claimers: false,
            row_locks: false,
            bounded_tx_claims: false,
        }
    }

    async fn begin(&self) -> Result<Box<dyn BackendTx>> {
        Ok(Box::new(SqlTx(self.begin_tx().await?)))
    }

    async fn queue_stats_scan(
        &self,
        queue: Option<&backlog_core::QueueName>,
        now: i64,
    ) -> Result<Vec<(String, backlog_core::QueueStats)>> {
        let stmt = cat::queue_stats_scan(now, queue.map(|q| q.as_str()));
        crate::engine::stats_from!(self, cat, queue, stmt)
    }

    async fn count_fold(&self, now: i64) -> Result<u64> {
        let pending: bool = cat::count_fold_pending(now)
            .scalar()
            .fetch_one(&self.pool)
            .await
            .db()?;
        if !pending {
            return Ok(0);
        }
        let mut tx = self.begin_tx().await?;
        cat::count_fold_due(now)
            .query()
            .execute(&mut *tx)
            .await
            .db()?;
        let dropped = cat::count_fold_drop(now)
            .query()
            .execute(&mut *tx)
            .await
            .db()?;
        tx.commit().await.db()?;
        Ok(dropped.rows_affected())
    }

    async fn migrate(&self) -> Result<MigrateReport> {
        // A schema already current is read without the write lock: the `backlog` command
        // migrates the embedded database before every command, and should not queue behind a
        // busy worker for nothing. Anything else (no table yet, a version missing) takes the
        // locked path below, which decides under the lock.
        let done: std::result::Result<Vec<i64>, _> = cat::migration_versions()
            .scalar()
            .fetch_all(&self.pool)
            .await;
        if let Ok(done) = done
            && cat::MIGRATIONS.iter().all(|m| done.contains(&m.version))
        {
            return Ok(MigrateReport {
                applied: vec![],
                current: crate::SCHEMA_VERSION,
            });
        }
        let mut conn = self.pool.acquire().await.db()?;
        // BEGIN IMMEDIATE takes the write lock up front: concurrent migrators queue behind it.
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        let applied = crate::engine::apply_migrations!(cat, tx, whole);
        tx.commit().await.db()?;
        Ok(MigrateReport {
            applied,
            current: crate::SCHEMA_VERSION,
        })
    }

    async fn job_insert(&self, params: JobInsertParams) -> Result<Vec<EnqueueOutcome>> {
        backlog_core::check_dependencies(&params.jobs)?;
        let dedup = Deduped::new(params.jobs);
        let now = params.now;
        let mut conn = self.pool.acquire().await.db()?;
        if batch::one_statement(&dedup.rows) {
            let per_row = batch::insert_all(
                &mut Inserter {
                    conn: &mut conn,
                    now,
                },
                &dedup.rows,
            )
            .await?;
            return Ok(dedup.outcomes(&per_row));
        }
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        let per_row = batch::insert_all(&mut Inserter { conn: &mut tx, now }, &dedup.rows).await?;
        if batch::any_grouped(&dedup.rows) {
            batch::place_in_groups(&mut *tx, &dedup.rows, &per_row, now).await?;
        }
        if batch::any_dependent(&dedup.rows) {
            batch::attach_parents(&mut *tx, &dedup.rows, &per_row, now).await?;
        }
        tx.commit().await.db()?;
        Ok(dedup.outcomes(&per_row))
    }

    async fn job_claim(&self, p: &JobClaimParams) -> Result<Vec<ClaimedJob>> {
        let mut conn = self.pool.acquire().await.db()?;
        // A claim is two statements (rows marked, then read back): one transaction, so that
        // a claim either hands its jobs over or leaves them available.
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        let jobs = self.claim_on(&mut tx, p).await?;
        tx.commit().await.db()?;
        Ok(jobs)
    }

    async fn job_complete_claim(&self, p: JobCompleteClaimParams) -> Result<CompleteClaimed> {
        if p.complete.jobs.is_empty() {
            return backlog_core::complete_then_claim(self, p).await;
        }
        let mut conn = self.pool.acquire().await.db()?;
        // One transaction: its commit, one fsync, records the completions and the claim.
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        let args = CompletionArgs::of(&p.complete.jobs);
        let mut lease_lost = false;
        if let Tokens::One(t) = args.tokens
            && p.groups.is_empty()
            && p.complete.retention == Retention::Delete
            && !p.claim.global_limit
        {
            // The common case in one command (`job_complete_claim_fifo.sql` says why); when a
            // lease was lost, undone and done again below, reading back which were completed.
            if let Some(done) = Self::complete_claim_on(&mut tx, &p, &args.jobs, t).await? {
                tx.commit().await.db()?;
                return Ok(done);
            }
            tx.rollback().await.db()?;
            tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
            lease_lost = true;
        }
        // Each finished job's turn in its ordered group straight to the group's next job,
        // before the completion (which may delete the rows that name the groups).
        let mut handed = match p.groups.is_empty() {
            true => vec![],
            false => Self::hand_off(&mut tx, &p).await?,
        };
        let completed = match (p.complete.retention, lease_lost) {
            // A lost lease already seen: straight to the completion that tells which.
            (Retention::Archive, _) | (_, true) => Self::complete_on(&mut tx, &p.complete).await?,
            (Retention::Delete | Retention::Keep, false) => {
                match Self::complete_all_on(&mut tx, &p.complete).await? {
                    Some(all) => all,
                    None => {
                        // Some had lost their lease: undone, and done again reading back which
                        // jobs were completed.
                        tx.rollback().await.db()?;
                        tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
                        if !p.groups.is_empty() {
                            handed = Self::hand_off(&mut tx, &p).await?;
                        }
                        Self::complete_on(&mut tx, &p.complete).await?
                    }
                }
            }
        };
        // The groups whose turn no job took: their next jobs are available to this very claim.
        let left = shared::groups_left(&p.groups, &handed);
        let promoted = match left.is_empty() {
            true => 0,
            false => {
                let (queue, now) = (p.claim.queue.as_str(), p.claim.now);
                batch::GroupOps::group_promote_locked(&mut *tx, queue, &left, now).await?
            }
        };
        let mut claimed = handed;
        if claimed.is_empty() {
            claimed = self.claim_on(&mut tx, &p.claim).await?;
        } else {
            let mut rest = p.claim.clone();
            rest.limit = rest.limit.saturating_sub(claimed.len() as u32);
            if rest.limit > 0 {
                claimed.extend(self.claim_on(&mut tx, &rest).await?);
                crate::rows::sort_claimed(&mut claimed, p.claim.order);
            }
        }
        tx.commit().await.db()?;
        Ok(CompleteClaimed {
            completed,
            claimed: Ok(claimed),
            promoted,
        })
    }

    async fn group_promote(&self, p: GroupPromoteParams) -> Result<u64> {
        let mut groups = p.groups;
        groups.sort_unstable();
        groups.dedup();
        let mut conn = self.pool.acquire().await.db()?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        let n =
            batch::GroupOps::group_promote_on(&mut *tx, p.queue.as_str(), &groups, p.now).await?;
        tx.commit().await.db()?;
        Ok(n)
    }

    async fn job_claim_tx(&self, _p: &JobClaimParams) -> Result<Option<Box<dyn TxClaim>>> {
        Err(Error::Unsupported(
            "transaction claim mode needs row locks; SQLite locks the whole database",
        ))
    }

    async fn job_complete(&self, p: JobCompleteParams) -> Result<Vec<JobRef>> {
        let mut conn = self.pool.acquire().await.db()?;
        if p.retention == Retention::Archive {
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
            let done = Self::complete_on(&mut tx, &p).await?;
            tx.commit().await.db()?;
            Ok(done)
        } else {
            Self::complete_on(&mut conn, &p).await
        }
    }

    async fn job_heartbeat(&self, p: JobHeartbeatParams) -> Result<bool> {
        let row: Option<bool> = cat::job_heartbeat(p.lease_expires_at, p.job.id, p.job.token)
            .scalar()
            .fetch_optional(&self.pool)
            .await
            .db()?;
        row.ok_or(Error::LeaseLost { job_id: p.job.id })
    }

    async fn job_prune(&self, p: JobPruneParams) -> Result<u64> {
        let mut conn = self.pool.acquire().await.db()?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        if p.archive {
            cat::job_prune_archive(
                p.queue.as_str(),
                p.state.as_str(),
                p.finished_before,
                p.limit as i64,
            )
            .query()
            .execute(&mut *tx)
            .await
            .db()?;
        }
        let res = cat::job_prune_delete(
            p.queue.as_str(),
            p.state.as_str(),
            p.finished_before,
            p.limit as i64,
        )
        .query()
        .execute(&mut *tx)
        .await
        .db()?;
        tx.commit().await.db()?;
        Ok(res.rows_affected())
    }

    async fn cron_fire(&self, p: CronFireParams) -> Result<Option<EnqueueOutcome>> {
        let mut conn = self.pool.acquire().await.db()?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        let res = cat::cron_advance(&p.name, p.tick)
            .query()
            .execute(&mut *tx)
            .await
            .db()?;
        if res.rows_affected() == 0 {
            return Ok(None); // already fired (the transaction rolls back on drop)
        }
        let dedup = Deduped::new(vec![p.job]);
        let per_row = batch::insert_all(
            &mut Inserter {
                conn: &mut tx,
                now: p.now,
            },
            &dedup.rows,
        )
        .await?;
        tx.commit().await.db()?;
        Ok(dedup.outcomes(&per_row).pop())
    }

    async fn job_count_pending(&self, p: &JobCountPendingParams) -> Result<i64> {
        let names: Vec<&str> = p.queues.iter().map(|q| q.as_str()).collect();
        cat::job_count_pending(
            serde_json::to_string(&names).expect("strings serialize"),
            shared::kinds_json(&p.kinds),
            p.due_by,
        )
        .scalar()
        .fetch_one(&self.pool)
        .await
        .db()
    }

    crate::engine::returning_methods!(cat);
}

crate::engine::sql_backend!(SqliteBackend, cat);

impl crate::tx::JobConnection for SqliteConnection {
    async fn backlog_enqueue(
        &mut self,
        jobs: Vec<NewJob>,
        now: i64,
    ) -> Result<Vec<EnqueueOutcome>> {
        backlog_core::check_dependencies(&jobs)?;
        crate::engine::ConnOps::ensure_queues(self, &jobs, now).await?;
        let dedup = Deduped::new(jobs);
        let per_row = batch::insert_all(&mut Inserter { conn: self, now }, &dedup.rows).await?;
        if batch::any_grouped(&dedup.rows) {
            batch::place_in_groups(self, &dedup.rows, &per_row, now).await?;
        }
        if batch::any_dependent(&dedup.rows) {
            batch::attach_parents(self, &dedup.rows, &per_row, now).await?;
        }
        Ok(dedup.outcomes(&per_row))
    }

    async fn backlog_complete(&mut self, params: &JobCompleteParams) -> Result<Vec<JobRef>> {
        SqliteBackend::complete_on(self, params).await
    }
}

crate::engine::conn_ops!(SqliteConnection, cat);

/// The database's triggers release the children of jobs that end (schema version 20).
impl crate::engine::Releases for SqliteConnection {
    async fn jobs_ended(&mut self, _ids: &[i64], _how: &'static str, _now: i64) -> Result<()> {
        Ok(())
    }
}

impl batch::DepOps for SqliteConnection {
    async fn deps_mark(&mut self, parents: &[i64]) -> Result<Vec<i64>> {
        cat::job_deps_mark(&shared::ids_json(parents))
            .scalar()
            .fetch_all(&mut *self)
            .await
            .db()
    }

    async fn deps_states(&mut self, ids: &[i64]) -> Result<Vec<(i64, String)>> {
        cat::job_deps_states(&shared::ids_json(ids))
            .as_()
            .fetch_all(&mut *self)
            .await
            .db()
    }

    async fn deps_link(&mut self, edges: &[(i64, i64, &'static str)]) -> Result<()> {
        let edges = serde_json::to_string(edges).expect("edges serialize");
        cat::job_deps_link(&edges)
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        Ok(())
    }

    async fn deps_wait(&mut self, left: i32, ids: &[i64]) -> Result<()> {
        cat::job_deps_wait(left, &shared::ids_json(ids))
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        Ok(())
    }

    async fn deps_cancel(&mut self, id: i64, left: i32, now: i64, error: &str) -> Result<()> {
        cat::job_deps_cancel(now, error, left, id)
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        Ok(())
    }
}

impl batch::GroupOps for SqliteConnection {
    async fn group_set(&mut self, ids: &[i64], groups: &[String]) -> Result<()> {
        for (id, group) in ids.iter().zip(groups) {
            cat::job_group_set(group, *id)
                .query()
                .execute(&mut *self)
                .await
                .db()?;
        }
        Ok(())
    }

    async fn group_lock(&mut self, _queue: &str, _groups: &[String]) -> Result<()> {
        // No lock rows: this runs in a write transaction, and SQLite has one writer.
        Ok(())
    }

    async fn group_promote_locked(
        &mut self,
        queue: &str,
        groups: &[String],
        now: i64,
    ) -> Result<u64> {
        let list = shared::json_list(groups);
        let mut promoted = 0;
        for _ in 0..batch::PROMOTE_ROUNDS {
            let rows: Vec<batch::Promoted> = cat::group_promote(queue, &list, now)
                .as_()
                .fetch_all(&mut *self)
                .await
                .db()?;
            promoted += rows.len() as u64;
            // One job per group per round: another round only where a group may hold more.
            if !batch::after_round(self, queue, rows, now).await? {
                break;
            }
        }
        Ok(promoted)
    }

    async fn group_rate_get(
        &mut self,
        queue: &str,
        groups: &[String],
    ) -> Result<Vec<(String, Option<i64>)>> {
        let list = shared::json_list(groups);
        cat::group_rate_get(queue, &list)
            .as_()
            .fetch_all(&mut *self)
            .await
            .db()
    }

    async fn group_rate_set(
        &mut self,
        queue: &str,
        rates: &[(String, i64)],
        paced: &[(i64, i64)],
    ) -> Result<()> {
        let rates = serde_json::to_string(rates).expect("pairs serialize");
        cat::group_rate_set(queue, &rates)
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        if !paced.is_empty() {
            let paced = serde_json::to_string(paced).expect("pairs serialize");
            cat::job_pace(&paced)
                .query()
                .execute(&mut *self)
                .await
                .db()?;
        }
        Ok(())
    }
}
