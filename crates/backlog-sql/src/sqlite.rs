//! SQLite: the embedded default. One writer connection (SQLite has a single writer anyway, and
//! queueing in the pool beats sleeping in the busy handler); WAL with `synchronous = FULL` so an
//! acknowledged job survives power loss.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use backlog_core::{
    AdminAction, AuditEntry, AuditListParams, Backend, Capabilities, ClaimStrategy, ClaimedJob,
    CompleteClaimed, CronFireParams, EnqueueOutcome, Error, Job, JobClaimParams,
    JobCompleteClaimParams, JobCompleteParams, JobCountPendingParams, JobFailParams,
    JobHeartbeatParams, JobInsertParams, JobListParams, JobProgressParams, JobPruneParams, JobRef,
    JobReleaseParams, JobRescueParams, LeaderParams, MigrateReport, NewJob, Ordering, QueueInfo,
    QueueName, QueueRedriveParams, QueueSettings, QueueStats, Rescued, Result, Retention,
    StatDepth, StatRow, TxClaim,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, Row, Sqlite, SqliteConnection, SqlitePool};

use crate::BackendConfig;
use crate::batch::{self, Deduped, INSERT_CHUNK};
use crate::catalog::{Stmt, sqlite as cat};
use crate::dberror::{DbResultExt, connect_error};
use crate::rows::{
    assign_ids, audit_from_row, claimed_from_row, job_from_row, queue_from_row, stat_from_row,
    unique_slot,
};
use crate::shared::{self, Tokens};
use crate::sqltext::Migration;

pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "runtime",
        sql: include_str!("../migrations/sqlite/0002_runtime.sql"),
    },
    Migration {
        version: 3,
        name: "quiet_notify",
        sql: include_str!("../migrations/sqlite/0003_quiet_notify.sql"),
    },
    Migration {
        version: 4,
        name: "lease_index",
        sql: include_str!("../migrations/sqlite/0004_lease_index.sql"),
    },
    Migration {
        version: 5,
        name: "operator",
        sql: include_str!("../migrations/sqlite/0005_operator.sql"),
    },
    Migration {
        version: 6,
        name: "trace_context",
        sql: include_str!("../migrations/sqlite/0006_trace_context.sql"),
    },
];

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
    /// Opens (creating if missing) the database file a `sqlite://PATH` URL names.
    pub async fn connect(url: &str, _config: &BackendConfig) -> Result<Self> {
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| connect_error(url, e))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(opts.clone())
            .await
            .map_err(|e| connect_error(url, e))?;
        let tx_pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(60))
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
                .query()
                .fetch_all(&mut *conn)
                .await
                .db()?;
            let mut created: Vec<(i64, Option<String>)> = rows
                .iter()
                .map(|r| {
                    let id: i64 = r.try_get("id")?;
                    let queue: String = r.try_get("queue")?;
                    let key: Option<String> = r.try_get("unique_key")?;
                    Ok((id, key.map(|k| unique_slot(&queue, &k))))
                })
                .collect::<Result<_, sqlx::Error>>()
                .db()?;
            created.sort_by_key(|(id, _)| *id);
            out.extend(assign_ids(&created, &Deduped::slots(chunk)));
        }
        Ok(out)
    }

    async fn find(&mut self, job: &NewJob) -> Result<Option<i64>> {
        let conn = &mut *self.conn;
        let Some(key) = &job.unique_key else {
            return Ok(None);
        };
        cat::job_find_unique(job.queue.as_str(), key.as_str())
            .scalar()
            .fetch_optional(&mut *conn)
            .await
            .db()
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
        let claim = match (p.strategy, p.order) {
            (ClaimStrategy::SingleWriter | ClaimStrategy::SkipLocked, Ordering::Fifo) => {
                cat::job_claim_fifo
            }
            (ClaimStrategy::SingleWriter | ClaimStrategy::SkipLocked, Ordering::Lifo) => {
                cat::job_claim_lifo
            }
            (ClaimStrategy::ClaimToken, Ordering::Fifo) => cat::job_claim_token_fifo,
            (ClaimStrategy::ClaimToken, Ordering::Lifo) => cat::job_claim_token_lifo,
        };
        let query = claim(
            token,
            &p.owner,
            expires,
            p.now,
            p.queue.as_str(),
            shared::kinds_json(&p.kinds),
            p.limit as i64,
        )
        .query();
        let rows = if p.strategy == ClaimStrategy::ClaimToken {
            query.execute(&mut *conn).await.db()?;
            cat::job_select_token(expires, token)
                .query()
                .fetch_all(&mut *conn)
                .await
                .db()?
        } else {
            query.fetch_all(&mut *conn).await.db()?
        };
        let mut jobs = rows
            .iter()
            .map(|r| Ok(claimed_from_row!(r, 0, p, token, expires)))
            .collect::<Result<Vec<_>>>()?;
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
    /// BENCHMARKS.md).
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
}

#[async_trait]
impl Backend for SqliteBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            skip_locked: false,
            update_returning: true,
            single_writer: true,
            row_locks: false,
            listen_notify: false,
        }
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
            && MIGRATIONS.iter().all(|m| done.contains(&m.version))
        {
            return Ok(MigrateReport {
                applied: vec![],
                current: crate::SCHEMA_VERSION,
            });
        }
        let mut conn = self.pool.acquire().await.db()?;
        // BEGIN IMMEDIATE takes the write lock up front: concurrent migrators queue behind it.
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        sqlx::raw_sql(cat::MIGRATION_TABLE)
            .execute(&mut *tx)
            .await
            .db()?;
        let done: Vec<i64> = cat::migration_versions()
            .scalar()
            .fetch_all(&mut *tx)
            .await
            .db()?;
        let mut applied = vec![];
        for m in MIGRATIONS.iter().filter(|m| !done.contains(&m.version)) {
            sqlx::raw_sql(m.sql).execute(&mut *tx).await.db()?;
            cat::migration_record(m.version, m.name, backlog_core::now_micros())
                .query()
                .execute(&mut *tx)
                .await
                .db()?;
            applied.push(m.version);
        }
        tx.commit().await.db()?;
        Ok(MigrateReport {
            applied,
            current: crate::SCHEMA_VERSION,
        })
    }

    async fn job_insert(&self, params: JobInsertParams) -> Result<Vec<EnqueueOutcome>> {
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
        tx.commit().await.db()?;
        Ok(dedup.outcomes(&per_row))
    }

    async fn job_claim(&self, p: &JobClaimParams) -> Result<Vec<ClaimedJob>> {
        let mut conn = self.pool.acquire().await.db()?;
        if p.strategy == ClaimStrategy::ClaimToken {
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
            let jobs = self.claim_on(&mut tx, p).await?;
            tx.commit().await.db()?;
            return Ok(jobs);
        }
        self.claim_on(&mut conn, p).await
    }

    async fn job_complete_claim(&self, p: JobCompleteClaimParams) -> Result<CompleteClaimed> {
        if p.complete.jobs.is_empty() {
            return backlog_core::complete_then_claim(self, p).await;
        }
        let mut conn = self.pool.acquire().await.db()?;
        // One transaction: its commit, one fsync, records the completions and the claim.
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        let completed = match p.complete.retention {
            Retention::Archive => Self::complete_on(&mut tx, &p.complete).await?,
            Retention::Delete | Retention::Keep => {
                match Self::complete_all_on(&mut tx, &p.complete).await? {
                    Some(all) => all,
                    None => {
                        // Some had lost their lease: undone, and done again reading back which
                        // jobs were completed.
                        tx.rollback().await.db()?;
                        tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
                        Self::complete_on(&mut tx, &p.complete).await?
                    }
                }
            }
        };
        let claimed = self.claim_on(&mut tx, &p.claim).await?;
        tx.commit().await.db()?;
        Ok(CompleteClaimed {
            completed,
            claimed: Ok(claimed),
        })
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

    async fn job_fail(&self, p: JobFailParams) -> Result<()> {
        let (state, run_at, finished) = shared::fail_target(&p);
        let res = cat::job_fail(
            state,
            run_at,
            finished,
            p.now,
            &p.error,
            p.job.id,
            p.job.token,
        )
        .query()
        .execute(&self.pool)
        .await
        .db()?;
        shared::fenced(res.rows_affected(), p.job.id)
    }

    async fn job_release(&self, p: JobReleaseParams) -> Result<()> {
        let res = cat::job_release(p.run_at, p.job.id, p.job.token)
            .query()
            .execute(&self.pool)
            .await
            .db()?;
        shared::fenced(res.rows_affected(), p.job.id)
    }

    async fn job_heartbeat(&self, p: JobHeartbeatParams) -> Result<bool> {
        let row: Option<bool> = cat::job_heartbeat(p.lease_expires_at, p.job.id, p.job.token)
            .scalar()
            .fetch_optional(&self.pool)
            .await
            .db()?;
        row.ok_or(Error::LeaseLost { job_id: p.job.id })
    }

    async fn job_progress(&self, p: JobProgressParams) -> Result<()> {
        let res = cat::job_progress(p.progress, p.result, p.job.id, p.job.token)
            .query()
            .execute(&self.pool)
            .await
            .db()?;
        shared::fenced(res.rows_affected(), p.job.id)
    }

    async fn job_cancel_request(&self, id: i64, now: i64) -> Result<Job> {
        let res = cat::job_cancel_request(now, id)
            .query()
            .execute(&self.pool)
            .await
            .db()?;
        let job = self.job_get(id).await?;
        shared::admin_result(id, AdminAction::Cancel, res.rows_affected(), job)
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

    async fn schema_version(&self) -> Result<i64> {
        match cat::schema_version()
            .scalar()
            .fetch_one(&self.pool)
            .await
            .db()
        {
            Err(Error::SchemaOutdated { .. }) => Ok(0),
            other => other,
        }
    }

    async fn queue_oldest_due(&self, now: i64) -> Result<Vec<(String, i64)>> {
        cat::queue_oldest_due(now)
            .as_()
            .fetch_all(&self.pool)
            .await
            .db()
    }

    async fn leader_elect(&self, p: &LeaderParams) -> Result<Option<i64>> {
        cat::leader_elect(&p.name, &p.holder, p.now, p.expires_at)
            .scalar()
            .fetch_optional(&self.pool)
            .await
            .db()
    }

    async fn leader_resign(&self, name: &str, holder: &str) -> Result<()> {
        cat::leader_resign(name, holder)
            .query()
            .execute(&self.pool)
            .await
            .db()?;
        Ok(())
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

    async fn topic_subscribe(
        &self,
        topic: &QueueName,
        queue: &QueueName,
        subscribe: bool,
        now: i64,
    ) -> Result<()> {
        let stmt = if subscribe {
            cat::topic_subscribe(topic.as_str(), queue.as_str(), now)
        } else {
            cat::topic_unsubscribe(topic.as_str(), queue.as_str())
        };
        stmt.query().execute(&self.pool).await.db()?;
        Ok(())
    }

    async fn topic_subscribers(&self, topic: &QueueName) -> Result<Vec<QueueName>> {
        let names: Vec<String> = cat::topic_subscribers(topic.as_str())
            .scalar()
            .fetch_all(&self.pool)
            .await
            .db()?;
        names.into_iter().map(QueueName::new).collect()
    }

    async fn job_rescue(&self, p: JobRescueParams) -> Result<Vec<Rescued>> {
        let rows: Vec<(String, bool)> = cat::job_rescue(p.now, p.limit as i64)
            .as_()
            .fetch_all(&self.pool)
            .await
            .db()?;
        Ok(rows
            .into_iter()
            .map(|(queue, dead)| Rescued { queue, dead })
            .collect())
    }

    async fn job_get(&self, id: i64) -> Result<Option<Job>> {
        let mut row = cat::job_get(id)
            .query()
            .fetch_optional(&self.pool)
            .await
            .db()?;
        if row.is_none() {
            row = cat::job_get_archived(id)
                .query()
                .fetch_optional(&self.pool)
                .await
                .db()?;
        }
        row.map(|r| Ok(job_from_row!(&r))).transpose()
    }

    async fn job_list(&self, p: JobListParams) -> Result<Vec<Job>> {
        let (state, mode) = shared::state_filter(p.state);
        let rows = cat::job_list(
            p.queue.as_ref().map(|q| q.as_str()),
            state,
            p.after_id,
            mode,
            p.now,
            p.limit as i64,
            p.kind.as_ref().map(|k| k.as_str()),
            p.unique_key.as_deref(),
        )
        .query()
        .fetch_all(&self.pool)
        .await
        .db()?;
        rows.iter().map(|r| Ok(job_from_row!(r))).collect()
    }

    async fn job_admin(&self, id: i64, action: AdminAction, now: i64) -> Result<Job> {
        let t = shared::admin_target(action, now);
        let res = cat::job_admin(
            t.to,
            t.run_at,
            t.reset_attempts,
            t.finished_at,
            id,
            t.from[0],
            t.from[1],
            t.from[2],
        )
        .query()
        .execute(&self.pool)
        .await
        .db()?;
        let job = self.job_get(id).await?;
        shared::admin_result(id, action, res.rows_affected(), job)
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

    async fn queue_redrive(&self, p: QueueRedriveParams) -> Result<u64> {
        let res = cat::queue_redrive(p.now, p.queue.as_str(), p.limit as i64)
            .query()
            .execute(&self.pool)
            .await;
        match res.db() {
            Ok(r) => Ok(r.rows_affected()),
            Err(e) if shared::is_unique_violation(&e) => {
                let ids: Vec<i64> = cat::queue_dead_ids(p.queue.as_str(), p.limit as i64)
                    .scalar()
                    .fetch_all(&self.pool)
                    .await
                    .db()?;
                shared::redrive_one_by_one(self, &ids, p.now).await
            }
            Err(e) => Err(e),
        }
    }

    async fn queue_get(&self, name: &QueueName) -> Result<Option<QueueSettings>> {
        let row = cat::queue_get(name.as_str())
            .query()
            .fetch_optional(&self.pool)
            .await
            .db()?;
        row.map(|r| Ok(queue_from_row!(&r))).transpose()
    }

    async fn queue_ensure(&self, name: &QueueName, now: i64) -> Result<()> {
        cat::queue_ensure(name.as_str(), now)
            .query()
            .execute(&self.pool)
            .await
            .db()?;
        Ok(())
    }

    async fn queue_upsert(&self, s: &QueueSettings, now: i64) -> Result<()> {
        cat::queue_upsert(
            s.name.as_str(),
            s.paused,
            s.max_attempts,
            s.backoff_base.as_millis() as i64,
            s.backoff_max.as_millis() as i64,
            s.lease.as_millis() as i64,
            s.order.as_str(),
            s.retention.as_str(),
            s.concurrency.map(|c| c as i32),
            now,
        )
        .query()
        .execute(&self.pool)
        .await
        .db()?;
        Ok(())
    }

    async fn queue_set_paused(&self, name: &QueueName, paused: bool, now: i64) -> Result<()> {
        cat::queue_set_paused(name.as_str(), paused, now)
            .query()
            .execute(&self.pool)
            .await
            .db()?;
        Ok(())
    }

    async fn queue_list(&self) -> Result<Vec<QueueInfo>> {
        let rows = cat::queue_all().query().fetch_all(&self.pool).await.db()?;
        let settings = rows
            .iter()
            .map(|r| Ok(queue_from_row!(r)))
            .collect::<Result<Vec<_>>>()?;
        let pending = cat::queue_pending()
            .query()
            .fetch_all(&self.pool)
            .await
            .db()?;
        let pending = pending
            .iter()
            .map(|r| Ok((r.try_get::<String, _>(0)?, r.try_get::<i64, _>(1)?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .db()?;
        shared::merge_queue_list(settings, pending)
    }

    async fn queue_stats(
        &self,
        queue: Option<&QueueName>,
        now: i64,
    ) -> Result<Vec<(String, QueueStats)>> {
        let rows = cat::queue_stats(now, queue.map(|q| q.as_str()))
            .query()
            .fetch_all(&self.pool)
            .await
            .db()?;
        let counts = rows
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<String, _>(0)?,
                    r.try_get::<String, _>(1)?,
                    r.try_get::<i64, _>(2)? != 0,
                    r.try_get::<i64, _>(3)? != 0,
                    r.try_get::<i64, _>(4)?,
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .db()?;
        let names = match queue {
            Some(q) => vec![q.as_str().to_owned()],
            None => cat::queue_names()
                .scalar()
                .fetch_all(&self.pool)
                .await
                .db()?,
        };
        shared::fold_stats(names, counts)
    }

    async fn stat_history(&self, queue: Option<&QueueName>, since: i64) -> Result<Vec<StatRow>> {
        self.op_stat_history(queue, since).await
    }

    async fn stat_totals(&self) -> Result<Vec<StatRow>> {
        self.op_stat_totals().await
    }

    async fn stat_prune(&self, before: i64) -> Result<u64> {
        self.op_stat_prune(before).await
    }

    async fn audit_list(&self, p: &AuditListParams) -> Result<Vec<AuditEntry>> {
        self.op_audit_list(p).await
    }

    async fn stat_add(&self, rows: &[StatRow]) -> Result<()> {
        self.op_stat_add(rows).await
    }

    async fn stat_snapshot(&self, minute: i64, depths: &[(String, StatDepth)]) -> Result<()> {
        self.op_stat_snapshot(minute, depths).await
    }

    async fn audit_add(&self, e: &AuditEntry) -> Result<i64> {
        cat::audit_add(
            e.at,
            e.actor.as_str(),
            e.action.as_str(),
            e.queue.as_deref(),
            e.job_id,
            e.detail.as_str(),
        )
        .scalar()
        .fetch_one(&self.pool)
        .await
        .db()
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

impl crate::tx::JobConnection for SqliteConnection {
    async fn backlog_enqueue(
        &mut self,
        jobs: Vec<NewJob>,
        now: i64,
    ) -> Result<Vec<EnqueueOutcome>> {
        for q in NewJob::queues_of(&jobs) {
            cat::queue_ensure(q.as_str(), now)
                .query()
                .execute(&mut *self)
                .await
                .db()?;
        }
        let dedup = Deduped::new(jobs);
        let per_row = batch::insert_all(&mut Inserter { conn: self, now }, &dedup.rows).await?;
        Ok(dedup.outcomes(&per_row))
    }

    async fn backlog_complete(&mut self, params: &JobCompleteParams) -> Result<Vec<JobRef>> {
        SqliteBackend::complete_on(self, params).await
    }
}

crate::operator::operator_methods!(SqliteBackend, catalog = crate::catalog::sqlite);
