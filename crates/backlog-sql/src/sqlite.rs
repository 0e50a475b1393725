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
    JobReleaseParams, JobRescueParams, LeaderParams, MigrateReport, NewJob, QueueInfo, QueueName,
    QueueRedriveParams, QueueSettings, QueueStats, Rescued, Result, Retention, StatDepth, StatRow,
    TxClaim,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, Connection, Row, SqliteConnection, SqlitePool};

use crate::BackendConfig;
use crate::batch::{self, Deduped, INSERT_CHUNK};
use crate::dberror::{DbResultExt, connect_error};
use crate::rows::{
    assign_ids, audit_from_row, bind_stat_counts, claimed_from_row, job_from_row, queue_from_row,
    stat_from_row, unique_slot,
};
use crate::shared::{self, ByToken, Completions, Tokens};
use crate::sqltext::{self, Migration, Ordered, question_rows};

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

macro_rules! q {
    ($name:literal) => {
        include_str!(concat!("../queries/sqlite/", $name, ".sql"))
    };
}

/// Both forms of a completion statement written with (id, token) pairs in `?1` (`each`): `one`
/// takes `?1` as a JSON array of ids and the one token as its last parameter, after `last`.
fn by_token(sql: &str, last: u32) -> ByToken<String> {
    const EACH: &str = "WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)";
    assert!(
        sql.contains(EACH),
        "a completion looks each job up by its pair"
    );
    let one = format!(
        "WHERE id IN (SELECT value FROM json_each(?1)) AND lease_token = ?{} \
         AND state = 'running'",
        last + 1
    );
    ByToken {
        each: sql.to_owned(),
        one: sql.replace(EACH, &one),
    }
}

static COMPLETIONS: std::sync::LazyLock<Completions> = std::sync::LazyLock::new(|| Completions {
    delete: by_token(q!("job_complete_delete"), 1).map(sqltext::shared_text),
    keep: by_token(q!("job_complete_keep"), 2).map(sqltext::shared_text),
    archive: by_token(q!("job_complete_archive"), 2).map(sqltext::shared_text),
});

/// The delete and keep statements of [`COMPLETIONS`] without `RETURNING`, for
/// [`SqliteBackend::complete_all_on`].
static UNREAD: std::sync::LazyLock<(ByToken<sqlx::SqlStr>, ByToken<sqlx::SqlStr>)> =
    std::sync::LazyLock::new(|| {
        let unread = |c: &ByToken<sqlx::SqlStr>| {
            c.clone().map(|s| {
                let s = s.as_str().strip_suffix("\nRETURNING id\n");
                sqltext::shared_text(s.expect("a completion ends with RETURNING id"))
            })
        };
        (unread(&COMPLETIONS.delete), unread(&COMPLETIONS.keep))
    });

/// A completion's arguments as SQLite's statements take them: `?1` the jobs as JSON ((id, token)
/// pairs, or the ids alone when they share one token), then now (but to delete), then the one
/// token.
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

    /// The statement of `sql` in this completion's form, with its arguments bound.
    fn query<'q>(
        &'q self,
        sql: &ByToken<sqlx::SqlStr>,
        now: Option<i64>,
    ) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
        let q = sqlx::query(sql.get(&self.tokens).clone()).bind(&self.jobs);
        let q = match now {
            Some(now) => q.bind(now),
            None => q,
        };
        match self.tokens {
            Tokens::One(t) => q.bind(t),
            Tokens::Each(_) => q,
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
    claim: Ordered,
    claim_token: Ordered,
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
            claim: Ordered::new(q!("job_claim")),
            claim_token: Ordered::new(q!("job_claim_token")),
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

/// Binds the values of a row that both insert statements share: queue, kind, payload, priority,
/// run_at, max_attempts, trace_context.
fn bind_job<'q>(
    query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    j: &NewJob,
    now: i64,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    query
        .bind(j.queue.as_str().to_owned())
        .bind(j.kind.as_ref().map(|k| k.as_str().to_owned()))
        .bind(j.payload.as_str().to_owned())
        .bind(j.priority)
        .bind(j.run_at.unwrap_or(now))
        .bind(j.max_attempts)
        .bind(j.trace_context.as_ref().map(|t| t.to_json()))
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
                let last = sqlx::query(q!("job_insert_uniform"))
                    .bind(first.queue.as_str().to_owned())
                    .bind(first.kind.as_ref().map(|k| k.as_str().to_owned()))
                    .bind(first.priority)
                    .bind(first.run_at.unwrap_or(now))
                    .bind(first.max_attempts)
                    .bind(now)
                    .bind(payloads)
                    .bind(first.trace_context.as_ref().map(|t| t.to_json()))
                    .execute(&mut *conn)
                    .await
                    .db()?
                    .last_insert_rowid();
                let first = last - chunk.len() as i64 + 1;
                out.extend((first..=last).map(Some));
                continue;
            }
            if chunk.iter().all(|j| j.unique_key.is_none()) {
                let sql =
                    q!("job_insert_plain").replace("/*ROWS*/", &question_rows(chunk.len(), 8));
                let mut query = sqlx::query(AssertSqlSafe(sql));
                for j in chunk {
                    query = bind_job(query, j, now).bind(now);
                }
                let last = query.execute(&mut *conn).await.db()?.last_insert_rowid();
                let first = last - chunk.len() as i64 + 1;
                out.extend((first..=last).map(Some));
                continue;
            }
            let sql = q!("job_insert").replace("/*ROWS*/", &question_rows(chunk.len(), 9));
            let mut query = sqlx::query(AssertSqlSafe(sql));
            for j in chunk {
                query = bind_job(query, j, now)
                    .bind(j.unique_key.as_ref().map(|k| k.as_str().to_owned()))
                    .bind(now);
            }
            let rows = query.fetch_all(&mut *conn).await.db()?;
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
        sqlx::query_scalar(q!("job_find_unique"))
            .bind(job.queue.as_str())
            .bind(key.as_str())
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
        let sql = match p.strategy {
            ClaimStrategy::SingleWriter | ClaimStrategy::SkipLocked => self.claim.get(p.order),
            ClaimStrategy::ClaimToken => self.claim_token.get(p.order),
        };
        let query = sqlx::query(sql)
            .bind(token)
            .bind(&p.owner)
            .bind(expires)
            .bind(p.now)
            .bind(p.queue.as_str())
            .bind(shared::kinds_json(&p.kinds))
            .bind(p.limit as i64);
        let rows = if p.strategy == ClaimStrategy::ClaimToken {
            query.execute(&mut *conn).await.db()?;
            sqlx::query(q!("job_select_token"))
                .bind(expires)
                .bind(token)
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
        let c = &*COMPLETIONS;
        let read = |rows: Vec<sqlx::sqlite::SqliteRow>| {
            rows.iter()
                .map(|r| r.try_get::<i64, _>(0).db())
                .collect::<Result<Vec<i64>>>()
        };
        let ids: Vec<i64> = match p.retention {
            Retention::Delete => read(args.query(&c.delete, None).fetch_all(conn).await.db()?)?,
            Retention::Keep => read(
                args.query(&c.keep, Some(p.now))
                    .fetch_all(conn)
                    .await
                    .db()?,
            )?,
            Retention::Archive => {
                args.query(&c.archive, Some(p.now))
                    .fetch_all(&mut *conn)
                    .await
                    .db()?;
                read(args.query(&c.delete, None).fetch_all(conn).await.db()?)?
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
        let sql = match p.retention {
            Retention::Delete => (&UNREAD.0, None),
            Retention::Keep => (&UNREAD.1, Some(p.now)),
            // Archiving reads back what it moved; the caller does not come here for it.
            Retention::Archive => return Ok(None),
        };
        let args = CompletionArgs::of(&p.jobs);
        let n = args.query(sql.0, sql.1).execute(conn).await.db()?;
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
        let done: std::result::Result<Vec<i64>, _> =
            sqlx::query_scalar("SELECT version FROM backlog_migration")
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
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS backlog_migration (version INTEGER PRIMARY KEY, \
             name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
        )
        .execute(&mut *tx)
        .await
        .db()?;
        let done: Vec<i64> = sqlx::query_scalar("SELECT version FROM backlog_migration")
            .fetch_all(&mut *tx)
            .await
            .db()?;
        let mut applied = vec![];
        for m in MIGRATIONS.iter().filter(|m| !done.contains(&m.version)) {
            sqlx::raw_sql(m.sql).execute(&mut *tx).await.db()?;
            sqlx::query(
                "INSERT INTO backlog_migration (version, name, applied_at) VALUES (?1, ?2, ?3)",
            )
            .bind(m.version)
            .bind(m.name)
            .bind(backlog_core::now_micros())
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
        let res = sqlx::query(q!("job_fail"))
            .bind(state)
            .bind(run_at)
            .bind(finished)
            .bind(p.now)
            .bind(&p.error)
            .bind(p.job.id)
            .bind(p.job.token)
            .execute(&self.pool)
            .await
            .db()?;
        shared::fenced(res.rows_affected(), p.job.id)
    }

    async fn job_release(&self, p: JobReleaseParams) -> Result<()> {
        let res = sqlx::query(q!("job_release"))
            .bind(p.run_at)
            .bind(p.job.id)
            .bind(p.job.token)
            .execute(&self.pool)
            .await
            .db()?;
        shared::fenced(res.rows_affected(), p.job.id)
    }

    async fn job_heartbeat(&self, p: JobHeartbeatParams) -> Result<bool> {
        let row: Option<bool> = sqlx::query_scalar(q!("job_heartbeat"))
            .bind(p.lease_expires_at)
            .bind(p.job.id)
            .bind(p.job.token)
            .fetch_optional(&self.pool)
            .await
            .db()?;
        row.ok_or(Error::LeaseLost { job_id: p.job.id })
    }

    async fn job_progress(&self, p: JobProgressParams) -> Result<()> {
        let res = sqlx::query(q!("job_progress"))
            .bind(p.progress)
            .bind(p.result)
            .bind(p.job.id)
            .bind(p.job.token)
            .execute(&self.pool)
            .await
            .db()?;
        shared::fenced(res.rows_affected(), p.job.id)
    }

    async fn job_cancel_request(&self, id: i64, now: i64) -> Result<Job> {
        let res = sqlx::query(q!("job_cancel_request"))
            .bind(now)
            .bind(id)
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
            sqlx::query(q!("job_prune_archive"))
                .bind(p.queue.as_str())
                .bind(p.state.as_str())
                .bind(p.finished_before)
                .bind(p.limit as i64)
                .execute(&mut *tx)
                .await
                .db()?;
        }
        let res = sqlx::query(q!("job_prune_delete"))
            .bind(p.queue.as_str())
            .bind(p.state.as_str())
            .bind(p.finished_before)
            .bind(p.limit as i64)
            .execute(&mut *tx)
            .await
            .db()?;
        tx.commit().await.db()?;
        Ok(res.rows_affected())
    }

    async fn schema_version(&self) -> Result<i64> {
        match sqlx::query_scalar(q!("schema_version"))
            .fetch_one(&self.pool)
            .await
            .db()
        {
            Err(Error::SchemaOutdated { .. }) => Ok(0),
            other => other,
        }
    }

    async fn queue_oldest_due(&self, now: i64) -> Result<Vec<(String, i64)>> {
        sqlx::query_as(q!("queue_oldest_due"))
            .bind(now)
            .fetch_all(&self.pool)
            .await
            .db()
    }

    async fn leader_elect(&self, p: &LeaderParams) -> Result<Option<i64>> {
        sqlx::query_scalar(q!("leader_elect"))
            .bind(&p.name)
            .bind(&p.holder)
            .bind(p.now)
            .bind(p.expires_at)
            .fetch_optional(&self.pool)
            .await
            .db()
    }

    async fn leader_resign(&self, name: &str, holder: &str) -> Result<()> {
        sqlx::query(q!("leader_resign"))
            .bind(name)
            .bind(holder)
            .execute(&self.pool)
            .await
            .db()?;
        Ok(())
    }

    async fn cron_fire(&self, p: CronFireParams) -> Result<Option<EnqueueOutcome>> {
        let mut conn = self.pool.acquire().await.db()?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.db()?;
        let res = sqlx::query(q!("cron_advance"))
            .bind(&p.name)
            .bind(p.tick)
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
        let q = if subscribe {
            sqlx::query(q!("topic_subscribe"))
                .bind(topic.as_str())
                .bind(queue.as_str())
                .bind(now)
        } else {
            sqlx::query(q!("topic_unsubscribe"))
                .bind(topic.as_str())
                .bind(queue.as_str())
        };
        q.execute(&self.pool).await.db()?;
        Ok(())
    }

    async fn topic_subscribers(&self, topic: &QueueName) -> Result<Vec<QueueName>> {
        let names: Vec<String> = sqlx::query_scalar(q!("topic_subscribers"))
            .bind(topic.as_str())
            .fetch_all(&self.pool)
            .await
            .db()?;
        names.into_iter().map(QueueName::new).collect()
    }

    async fn job_rescue(&self, p: JobRescueParams) -> Result<Vec<Rescued>> {
        let rows: Vec<(String, bool)> = sqlx::query_as(q!("job_rescue"))
            .bind(p.now)
            .bind(p.limit as i64)
            .fetch_all(&self.pool)
            .await
            .db()?;
        Ok(rows
            .into_iter()
            .map(|(queue, dead)| Rescued { queue, dead })
            .collect())
    }

    async fn job_get(&self, id: i64) -> Result<Option<Job>> {
        let mut row = sqlx::query(q!("job_get"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .db()?;
        if row.is_none() {
            row = sqlx::query(q!("job_get_archived"))
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .db()?;
        }
        row.map(|r| Ok(job_from_row!(&r))).transpose()
    }

    async fn job_list(&self, p: JobListParams) -> Result<Vec<Job>> {
        let (state, mode) = shared::state_filter(p.state);
        let rows = sqlx::query(q!("job_list"))
            .bind(p.queue.as_ref().map(|q| q.as_str()))
            .bind(state)
            .bind(p.after_id)
            .bind(mode)
            .bind(p.now)
            .bind(p.limit as i64)
            .bind(p.kind.as_ref().map(|k| k.as_str()))
            .bind(p.unique_key.as_deref())
            .fetch_all(&self.pool)
            .await
            .db()?;
        rows.iter().map(|r| Ok(job_from_row!(r))).collect()
    }

    async fn job_admin(&self, id: i64, action: AdminAction, now: i64) -> Result<Job> {
        let t = shared::admin_target(action, now);
        let res = sqlx::query(q!("job_admin"))
            .bind(t.to)
            .bind(t.run_at)
            .bind(t.reset_attempts)
            .bind(t.finished_at)
            .bind(id)
            .bind(t.from[0])
            .bind(t.from[1])
            .bind(t.from[2])
            .execute(&self.pool)
            .await
            .db()?;
        let job = self.job_get(id).await?;
        shared::admin_result(id, action, res.rows_affected(), job)
    }

    async fn job_count_pending(&self, p: &JobCountPendingParams) -> Result<i64> {
        let names: Vec<&str> = p.queues.iter().map(|q| q.as_str()).collect();
        sqlx::query_scalar(q!("job_count_pending"))
            .bind(serde_json::to_string(&names).expect("strings serialize"))
            .bind(shared::kinds_json(&p.kinds))
            .bind(p.due_by)
            .fetch_one(&self.pool)
            .await
            .db()
    }

    async fn queue_redrive(&self, p: QueueRedriveParams) -> Result<u64> {
        let res = sqlx::query(q!("queue_redrive"))
            .bind(p.now)
            .bind(p.queue.as_str())
            .bind(p.limit as i64)
            .execute(&self.pool)
            .await;
        match res.db() {
            Ok(r) => Ok(r.rows_affected()),
            Err(e) if shared::is_unique_violation(&e) => {
                let ids: Vec<i64> = sqlx::query_scalar(q!("queue_dead_ids"))
                    .bind(p.queue.as_str())
                    .bind(p.limit as i64)
                    .fetch_all(&self.pool)
                    .await
                    .db()?;
                shared::redrive_one_by_one(self, &ids, p.now).await
            }
            Err(e) => Err(e),
        }
    }

    async fn queue_get(&self, name: &QueueName) -> Result<Option<QueueSettings>> {
        let row = sqlx::query(q!("queue_get"))
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await
            .db()?;
        row.map(|r| Ok(queue_from_row!(&r))).transpose()
    }

    async fn queue_ensure(&self, name: &QueueName, now: i64) -> Result<()> {
        sqlx::query(q!("queue_ensure"))
            .bind(name.as_str())
            .bind(now)
            .execute(&self.pool)
            .await
            .db()?;
        Ok(())
    }

    async fn queue_upsert(&self, s: &QueueSettings, now: i64) -> Result<()> {
        sqlx::query(q!("queue_upsert"))
            .bind(s.name.as_str())
            .bind(s.paused)
            .bind(s.max_attempts)
            .bind(s.backoff_base.as_millis() as i64)
            .bind(s.backoff_max.as_millis() as i64)
            .bind(s.lease.as_millis() as i64)
            .bind(s.order.as_str())
            .bind(s.retention.as_str())
            .bind(s.concurrency.map(|c| c as i32))
            .bind(now)
            .execute(&self.pool)
            .await
            .db()?;
        Ok(())
    }

    async fn queue_set_paused(&self, name: &QueueName, paused: bool, now: i64) -> Result<()> {
        sqlx::query(q!("queue_set_paused"))
            .bind(name.as_str())
            .bind(paused)
            .bind(now)
            .execute(&self.pool)
            .await
            .db()?;
        Ok(())
    }

    async fn queue_list(&self) -> Result<Vec<QueueInfo>> {
        let rows = sqlx::query(q!("queue_all"))
            .fetch_all(&self.pool)
            .await
            .db()?;
        let settings = rows
            .iter()
            .map(|r| Ok(queue_from_row!(r)))
            .collect::<Result<Vec<_>>>()?;
        let pending = sqlx::query(q!("queue_pending"))
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
        let rows = sqlx::query(q!("queue_stats"))
            .bind(now)
            .bind(queue.map(|q| q.as_str()))
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
            None => sqlx::query_scalar("SELECT name FROM backlog_queue")
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
        sqlx::query_scalar(q!("audit_add"))
            .bind(e.at)
            .bind(e.actor.as_str())
            .bind(e.action.as_str())
            .bind(e.queue.as_deref())
            .bind(e.job_id)
            .bind(e.detail.as_str())
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
            sqlx::query(q!("queue_ensure"))
                .bind(q.as_str())
                .bind(now)
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

crate::operator::operator_methods!(SqliteBackend, queue_binds = 1);
