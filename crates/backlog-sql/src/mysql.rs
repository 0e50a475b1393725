//! MySQL 8 and MariaDB 10.6+, written to their common subset. Claims are `SELECT … FOR UPDATE
//! SKIP LOCKED` then `UPDATE` in one transaction (no `UPDATE … RETURNING`); sessions run at READ
//! COMMITTED so claimers and producers take no gap locks; transaction claim mode holds a job's
//! row lock in an open transaction.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog_core::{
    AuditEntry, BackendTx, Capabilities, ClaimStrategy, ClaimedJob, CompleteClaimed,
    CronFireParams, DbErrorKind, EnqueueOutcome, Error, GroupPromoteParams, JobClaimParams,
    JobCompleteClaimParams, JobCompleteParams, JobCountPendingParams, JobHeartbeatParams,
    JobInsertParams, JobPruneParams, JobRef, JobRescueParams, JobVacuumParams, JobVacuumed,
    LeaderParams, MigrateReport, NewJob, OldestTransaction, Ordering, QueueRedriveParams, Rescued,
    Result, Retention, TxClaim,
};
use futures::future::BoxFuture;
use sqlx::mysql::MySqlConnectOptions;
use sqlx::{Connection, MySql, MySqlConnection, MySqlPool, Row};

use crate::batch::{self, Deduped, INSERT_CHUNK};
use crate::catalog::{Stmt, mysql as cat};
use crate::cursor::{ClaimCost, Cursors, Floor, Key, Plan};
use crate::dberror::{DbResultExt, connect_error, connect_within};
use crate::engine::{Dialect, SqlTx, SqlTxClaim};
use crate::hosts::{self, Hosts};
use crate::rows::{
    assign_ids, audit_from_row, claimed_from_row, job_from_row, queue_from_row, stat_from_row,
};
use crate::{BackendConfig, shared};

/// The MySQL / MariaDB backend.
#[derive(Debug, Clone)]
pub struct MySqlBackend {
    pool: MySqlPool,
    /// `Some(step)` when the ids of one multi-row INSERT are consecutive (auto-increment lock
    /// mode 0 or 1), `step` apart; `None` when they may interleave with other sessions' ids.
    id_step: Option<i64>,
    /// A node of a Galera cluster: row locks are local to a node (no transaction claim mode),
    /// GET_LOCK does not lock the cluster, and conflicts surface at commit.
    cluster: bool,
    /// Each queue's `shards` as last read: where inserts put its jobs and where claims start.
    shards: Arc<ShardCounts>,
    /// When the leader may next rebuild the job table (`job_vacuum`).
    compaction: Arc<std::sync::Mutex<Compaction>>,
    /// The server refused `TRUNCATE … NOWAIT` (MySQL 8): the ring's tables are emptied with a
    /// wait of at most a second instead (`job_done_turn`).
    truncate_waits: Arc<std::sync::atomic::AtomicBool>,
}

/// The ring of completed jobs' tables (schema version 17): `backlog_job_done_0` …
/// `backlog_job_done_15`.
const DONE_TABLES: u8 = 16;

/// The leader's rebuilds of the job table while an old snapshot keeps purge from removing the
/// records completed jobs leave (MariaDB; see `job_compact.sql`).
#[derive(Debug, Default)]
struct Compaction {
    /// The database refused it for good (MySQL 8, no ALTER privilege, Galera).
    unsupported: bool,
    /// No rebuild before this (after one that waited for the table in vain).
    not_before: Option<Instant>,
    /// The wait after the next such rebuild.
    backoff: Duration,
}

/// The table of the ring a view's definition reads: the digits after its last
/// `backlog_job_done_`.
fn done_table_of(definition: &str) -> Option<u8> {
    let at = definition.rfind("backlog_job_done_")? + "backlog_job_done_".len();
    let digits: String = definition[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|&n| n < DONE_TABLES)
}

/// A MySQL error's number (1205: a lock wait timed out).
fn mysql_number(e: &dyn sqlx::error::DatabaseError) -> Option<u16> {
    e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .map(|e| e.number())
}

/// A tablespace smaller than this is left as it is.
const COMPACT_MIN_BYTES: i64 = 16 << 20;
/// A rebuild only while another connection's transaction has been open this long (seconds):
/// otherwise purge removes the records by itself.
const COMPACT_OLDEST_S: i64 = 10;
/// The first wait after a rebuild that found the table held, doubled each time up to the last.
const COMPACT_BACKOFF: (Duration, Duration) =
    (Duration::from_secs(60), Duration::from_secs(30 * 60));

/// How long a queue's `shards` read by [`ShardCounts`] is used before it is read again.
const SHARDS_FRESH: Duration = Duration::from_secs(5);

/// Each queue's `shards` (`queue_shards.sql`) as last read, for at most [`SHARDS_FRESH`]. A count
/// read before a change is only a placement: an insert that used a count since lowered leaves
/// jobs on a shard the leader's sweep moves (`job_reshard.sql`), and a claim that used a count
/// since raised reads it again before it comes back short, so that a short claim has always
/// visited every shard the queue has.
/// Beside them, where this process's FIFO claims start on each shard (see `cursor`).
#[derive(Debug, Default)]
struct ShardCounts {
    counts: std::sync::Mutex<HashMap<String, (u16, Instant)>>,
    cursors: Arc<Cursors>,
    shape: ClaimShape,
}

/// Which of its two forms this process's claims take. The locking read of the claim index
/// (`job_claim_fifo.sql`) is the faster while purge keeps up. While it does not (another
/// session holds an old snapshot, or purge lags), that read pays for every entry it steps on,
/// and under a snapshot held 3 minutes at 2,000 jobs/s a claim of a few jobs took 0.2–0.4 s,
/// where the two-step form (`job_claim_twostep_fifo.sql`: candidates read without locking,
/// then locked by primary key) stays near a millisecond; on a purged index the two-step form
/// drains about 20% slower. So two locking claim statements slower than [`SLOW_CLAIM`] within
/// [`SLOW_WITHIN`] of each other move this process to the two-step form for [`TWO_STEP_FOR`],
/// after which it tries the locking read again; each time that try fails at once the next
/// stretch is twice as long, up to [`TWO_STEP_MAX`] (a try costs a few slow claims: at 60 s
/// apart, p99 enqueue-to-start was 1.4 s after 5 minutes of a held snapshot). (Not every locking claim is slow under a held
/// snapshot: in 5 minutes at 2,000 jobs/s, 287 of roughly 12,000 were, 0.2–3 s each, enough
/// to bring the queue's p50 to 0.4 s.)
#[derive(Debug, Default)]
struct ClaimShape {
    two_step_until: std::sync::Mutex<Option<Instant>>,
    /// When the last locking claim slower than [`SLOW_CLAIM`] was.
    last_slow: std::sync::Mutex<Option<Instant>>,
    /// How long the last stretch of two-step claims was.
    stretch: std::sync::Mutex<Duration>,
}

/// A locking claim statement slower than this is a slow one. A claim statement takes about a
/// millisecond; the slow ones of a held snapshot, hundreds.
const SLOW_CLAIM: Duration = Duration::from_millis(100);

/// Two slow locking claims this close move claims to the two-step form: one on a busy machine
/// is noise.
const SLOW_WITHIN: Duration = Duration::from_secs(10);

/// How long claims keep the two-step form before they try the locking read again.
const TWO_STEP_FOR: Duration = Duration::from_secs(60);

/// The longest stretch of two-step claims.
const TWO_STEP_MAX: Duration = Duration::from_secs(16 * 60);

impl ClaimShape {
    /// True while claims take the two-step form.
    fn two_step(&self) -> bool {
        let until = self
            .two_step_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        until.is_some_and(|t| Instant::now() < t)
    }

    /// What a claim statement of the given form took.
    fn took(&self, two_step: bool, took: Duration) {
        if two_step || took <= SLOW_CLAIM {
            return;
        }
        let now = Instant::now();
        let mut last = self.last_slow.lock().unwrap_or_else(|e| e.into_inner());
        let again = last.is_some_and(|at| now.duration_since(at) <= SLOW_WITHIN);
        *last = Some(now);
        if !again {
            return;
        }
        let mut until = self
            .two_step_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut stretch = self.stretch.lock().unwrap_or_else(|e| e.into_inner());
        // Slow again within a stretch of the last one's end: the cause is still there.
        *stretch = match *until {
            Some(end) if now.duration_since(end) <= *stretch => (*stretch * 2).min(TWO_STEP_MAX),
            _ => TWO_STEP_FOR,
        };
        *until = Some(now + *stretch);
        tracing::debug!(
            took_ms = took.as_millis() as u64,
            "locking claims are slow: claims read their candidates first for {} s",
            stretch.as_secs()
        );
    }
}

impl ShardCounts {
    /// The count, from the cache while fresh, else read on `conn`.
    async fn get(&self, conn: &mut MySqlConnection, queue: &str) -> Result<u16> {
        let cached = (self.counts.lock().expect("lock").get(queue))
            .filter(|(_, at)| at.elapsed() < SHARDS_FRESH)
            .map(|(n, _)| *n);
        match cached {
            Some(n) => Ok(n),
            None => self.read(conn, queue).await,
        }
    }

    /// The count read now on `conn`, and kept.
    async fn read(&self, conn: &mut MySqlConnection, queue: &str) -> Result<u16> {
        let n = read_shards(conn, queue).await?;
        let mut cache = self.counts.lock().expect("lock");
        if cache.len() >= 10_000 {
            cache.clear(); // queue names come and go; never let them pile up
        }
        cache.insert(queue.to_owned(), (n, Instant::now()));
        Ok(n)
    }

    /// Forgets every count (a queue's settings changed through this backend).
    fn clear(&self) {
        self.counts.lock().expect("lock").clear();
    }
}

/// A queue's `shards`, read on `conn` (1 for a queue without settings).
async fn read_shards(conn: &mut MySqlConnection, queue: &str) -> Result<u16> {
    let n: i64 = cat::queue_shards(queue)
        .scalar()
        .fetch_one(&mut *conn)
        .await
        .db()?;
    Ok(n.clamp(1, 256) as u16)
}

/// A shard at random below `n`.
fn random_shard(n: u16) -> i16 {
    match n {
        0 | 1 => 0,
        n => rand::Rng::random_range(&mut rand::rng(), 0..n) as i16,
    }
}

impl MySqlBackend {
    /// Empties table `slot` of the completed jobs' ring, after archiving its jobs of queues
    /// whose retention is now `archive`: true when emptied, false when a session held it (the
    /// leader tries again at its next pass). On a connection of its own, closed after.
    async fn done_empty(&self, slot: u8) -> Result<bool> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut conn = self.pool.acquire().await.db()?.detach();
        let archived = sqlx::raw_sql(sqlx::AssertSqlSafe(cat::job_done_archive(slot)))
            .execute(&mut conn)
            .await;
        let emptied = match archived {
            Err(e) => Err(e),
            Ok(_) if self.truncate_waits.load(Relaxed) => {
                let empty = cat::job_done_empty_wait(slot);
                sqlx::raw_sql(sqlx::AssertSqlSafe(empty))
                    .execute(&mut conn)
                    .await
            }
            Ok(_) => {
                let empty = cat::job_done_empty(slot);
                match sqlx::raw_sql(sqlx::AssertSqlSafe(empty))
                    .execute(&mut conn)
                    .await
                {
                    // MySQL 8: no NOWAIT on TRUNCATE (a syntax error); wait a second instead.
                    Err(sqlx::Error::Database(e)) if mysql_number(&*e) == Some(1064) => {
                        self.truncate_waits.store(true, Relaxed);
                        let empty = cat::job_done_empty_wait(slot);
                        sqlx::raw_sql(sqlx::AssertSqlSafe(empty))
                            .execute(&mut conn)
                            .await
                    }
                    done => done,
                }
            }
        };
        conn.close().await.ok();
        match emptied {
            Ok(_) => Ok(true),
            // A session that read it in an open transaction, or InnoDB's statistics thread for a
            // moment after the table's last writes, holds its metadata lock.
            Err(sqlx::Error::Database(e)) if mysql_number(&*e) == Some(1205) => {
                tracing::debug!(error = %e, slot, "backlog: a session holds a table of completed jobs");
                Ok(false)
            }
            Err(e) => Err(e).db(),
        }
    }

    /// Stops the job table's rebuilds for good when the database refused one for a reason
    /// retrying does not change (MySQL 8's information schema, no ALTER privilege), saying so
    /// once; other errors are returned.
    fn compact_refused(&self, err: sqlx::Error) -> Result<()> {
        let number = match &err {
            sqlx::Error::Database(e) => mysql_number(&**e),
            _ => None,
        };
        // ER_UNKNOWN_TABLE (information schema), ER_TABLEACCESS_DENIED_ERROR,
        // ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_ALTER_OPERATION_NOT_SUPPORTED(_REASON), syntax.
        if !matches!(number, Some(1109 | 1142 | 1227 | 1845 | 1846 | 1064)) {
            return Err(crate::dberror::db(err));
        }
        self.compaction.lock().expect("lock").unsupported = true;
        tracing::warn!(
            error = %err,
            "backlog: cannot rebuild backlog_job; while another session holds an old snapshot, \
             the records of completed jobs stay until it ends"
        );
        Ok(())
    }

    /// Claims take the two-step form for the next `for_` (see `ClaimShape`), as they do on
    /// their own after a slow locking claim. For tests of that form.
    #[doc(hidden)]
    pub fn two_step_claims(&self, for_: Duration) {
        *self.shards.shape.two_step_until.lock().expect("lock") = Some(Instant::now() + for_);
    }

    /// What the next FIFO claim of `limit` jobs of `queue` costs, in InnoDB pages accessed
    /// (`r_engine_stats.pages_accessed`, which sees the delete-marked records a walk steps over
    /// where `Handler_read_*` do not): `ANALYZE FORMAT=JSON` of each shard's claim SELECT
    /// (`job_claim_fifo`), from this process's cursors and from the head, in a transaction
    /// rolled back. For tests and diagnostics.
    #[doc(hidden)]
    pub async fn claim_cost(&self, queue: &str, limit: u32) -> Result<ClaimCost> {
        let keys = self.shards.cursors.keys(queue);
        let from = |plan: Plan| async move {
            let mut tx = self.pool.begin().await.db()?;
            let n = self.shards.read(&mut tx, queue).await?;
            let (now, limit) = (backlog_core::now_micros(), i64::from(limit));
            let mut pages = 0;
            for shard in 0..i32::from(n) {
                let args = ClaimArgs {
                    queue,
                    shard,
                    now,
                    kinds: None,
                    limit,
                    after: plan.key(shard),
                    two_step: self.shards.shape.two_step(),
                };
                let stmt = plain_claim(Ordering::Fifo)(&args);
                let json: String = (stmt.prefixed("ANALYZE FORMAT=JSON").scalar())
                    .fetch_one(&mut *tx)
                    .await
                    .db()?;
                let json: serde_json::Value = serde_json::from_str(&json)
                    .map_err(|_| Error::Unsupported("ANALYZE FORMAT=JSON without JSON"))?;
                pages += pages_accessed(&json);
            }
            tx.rollback().await.db()?;
            Ok::<_, backlog_core::Error>(pages)
        };
        Ok(ClaimCost {
            cursor: from(Plan::at(keys)).await?,
            full_pass: from(Plan::head()).await?,
        })
    }

    /// Begins a transaction (the name the shared backend code uses for every dialect; see
    /// `PgBackend::tx`).
    pub(crate) async fn tx(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::MySql>> {
        crate::begin::begin(&self.pool, None).await
    }

    /// Connects to the database a `mysql://…` (or `mariadb://…`) URL names. The URL may list
    /// several hosts (`h1:p1,h2:p2`, the nodes of a Galera cluster): connections go to the first
    /// that answers and is ready, and move on when it fails (`crate::hosts`).
    pub async fn connect(url: &str, config: &BackendConfig) -> Result<Self> {
        // The driver reads `mariadb://` URLs too: it does not look at the scheme.
        let parse = |u: &str| MySqlConnectOptions::from_str(u).map_err(|e| connect_error(u, e));
        let hosts = Hosts::<MySql>::connect(url, config, parse, node_ready).await?;
        // One direct connection first: an unreachable server or bad credentials fail at once
        // instead of after the pool's acquire timeout.
        let mut first = connect_within(
            hosts.current_url(),
            config.connect_timeout,
            MySqlConnection::connect_with(&hosts.current_options()),
        )
        .await?;
        let cluster = connect_within(url, config.connect_timeout, galera_on(&mut first)).await?;
        first.close().await.ok();
        let pool = hosts
            .pool_options(config)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    // READ COMMITTED: no gap locks between claimers and producers.
                    sqlx::raw_sql(cat::SESSION_READ_COMMITTED)
                        .execute(&mut *conn)
                        .await?;
                    if cluster {
                        sqlx::raw_sql(cat::SESSION_CAUSAL_READS)
                            .execute(&mut *conn)
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect_lazy_with(hosts.current_options());
        hosts::watch(pool.clone(), hosts, config.host_check_every);
        let mut backend = Self::from_pool(pool);
        backend.cluster = cluster;
        let (mode, step): (i64, i64) = connect_within(
            url,
            config.connect_timeout,
            cat::db_autoinc().as_().fetch_one(&backend.pool),
        )
        .await?;
        backend.id_step = (mode == 0 || mode == 1).then_some(step.max(1));
        Ok(backend)
    }

    /// Uses an existing pool (the caller's own sqlx pool). Its sessions should run at READ
    /// COMMITTED, as [`connect`](Self::connect) sets up; ids of a batch are read back by marker.
    pub fn from_pool(pool: MySqlPool) -> Self {
        MySqlBackend {
            pool,
            id_step: None,
            cluster: false,
            shards: Arc::default(),
            compaction: Arc::default(),
            truncate_waits: Arc::default(),
        }
    }

    /// The pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// One claim attempt in its own transaction.
    async fn claim_once(&self, p: &JobClaimParams) -> Result<Vec<ClaimedJob>> {
        match p.strategy {
            _ if p.global_limit => {
                let mut tx = self.tx().await.db()?;
                let jobs = claim_limited_on(&mut tx, &self.shards, p, self.cluster).await?;
                tx.commit().await.db()?;
                Ok(jobs)
            }
            ClaimStrategy::SingleWriter | ClaimStrategy::SkipLocked => {
                let mut tx = self.tx().await.db()?;
                let jobs = claim_on(&mut tx, &self.shards, p, p.limit).await?;
                tx.commit().await.db()?;
                Ok(jobs)
            }
            ClaimStrategy::ClaimToken => {
                let token = shared::new_token();
                let expires = p.now + p.lease.as_micros() as i64;
                let kinds = shared::kinds_json(&p.kinds);
                let mut tx = self.tx().await.db()?;
                let (queue, kinds, limit) = (p.queue.as_str(), kinds.as_deref(), p.limit as i64);
                let claim = match p.order {
                    Ordering::Fifo => cat::job_claim_token_fifo,
                    Ordering::Lifo => cat::job_claim_token_lifo,
                };
                let mut marked = 0;
                let mut walk = ShardWalk::new(&mut tx, &self.shards, queue).await?;
                while marked < limit {
                    let Some(shard) = walk.next(&mut tx, queue).await? else {
                        break;
                    };
                    let res = claim(
                        token,
                        &p.owner,
                        expires,
                        p.now,
                        queue,
                        shard,
                        kinds,
                        limit - marked,
                    )
                    .query()
                    .execute(&mut *tx)
                    .await
                    .db()?;
                    marked += res.rows_affected() as i64;
                }
                if marked == 0 {
                    tx.commit().await.db()?;
                    return Ok(vec![]);
                }
                let rows = cat::job_select_token(expires, token)
                    .query()
                    .fetch_all(&mut *tx)
                    .await
                    .db()?;
                tx.commit().await.db()?;
                let mut jobs = rows
                    .iter()
                    .map(|r| Ok(claimed_from_row!(r, 0, p, token, expires)))
                    .collect::<Result<Vec<_>>>()?;
                crate::rows::sort_claimed(&mut jobs, p.order);
                Ok(jobs)
            }
        }
    }

    /// Migrations missing from `backlog_migration`, applied statement by statement on `conn`
    /// (which holds the migration lock). MySQL commits each DDL statement by itself.
    async fn migrate_on(conn: &mut MySqlConnection) -> Result<Vec<i64>> {
        Ok(crate::engine::apply_migrations!(cat, conn, split))
    }
}

/// A transaction claim's transaction, which the server ends (rolling it back, freeing its rows)
/// once the client has been silent for a lease (`session_claim_begin.sql`). Dropped before it
/// ends, or if its end fails, it closes its connection, so no session leaves it open or carries
/// the shortened wait_timeout back into the pool.
struct SilenceBoundTx {
    conn: sqlx::pool::PoolConnection<MySql>,
    ended: bool,
}

impl SilenceBoundTx {
    async fn begin(pool: &MySqlPool, lease: Duration) -> Result<Self> {
        let conn = pool.acquire().await.db()?;
        let mut tx = Self { conn, ended: false };
        let secs = lease.as_secs() + u64::from(lease.subsec_nanos() > 0);
        let secs = secs.clamp(1, i32::MAX as u64) as i64;
        let conn = &mut *tx.conn;
        cat::session_claim_begin(secs)
            .query()
            .execute(&mut *conn)
            .await
            .db()?;
        sqlx::raw_sql(cat::SESSION_CLAIM_OPEN)
            .execute(&mut *conn)
            .await
            .db()?;
        Ok(tx)
    }

    async fn end(mut self, stmt: &'static str) -> Result<()> {
        sqlx::raw_sql(stmt).execute(&mut *self.conn).await.db()?;
        self.ended = true;
        Ok(())
    }
}

impl Drop for SilenceBoundTx {
    fn drop(&mut self) {
        if !self.ended {
            self.conn.close_on_drop();
        }
    }
}

impl std::ops::Deref for SilenceBoundTx {
    type Target = MySqlConnection;

    fn deref(&self) -> &MySqlConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for SilenceBoundTx {
    fn deref_mut(&mut self) -> &mut MySqlConnection {
        &mut self.conn
    }
}

impl crate::engine::HeldTx for SilenceBoundTx {
    type DB = MySql;

    async fn commit(self) -> Result<()> {
        self.end(cat::SESSION_CLAIM_COMMIT).await
    }

    async fn rollback(self) -> Result<()> {
        self.end(cat::SESSION_CLAIM_ROLLBACK).await
    }
}

// Ids as the JSON arrays the locked statements look up one by one.
crate::engine::locked_ops!(MySqlConnection, cat, shared::ids_json, keep copies);

/// Whether the server is a Galera node (`wsrep_on`).
async fn galera_on(conn: &mut MySqlConnection) -> std::result::Result<bool, sqlx::Error> {
    let row = sqlx::raw_sql(cat::DB_CLUSTER)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match row {
        Some(row) => row.try_get::<String, _>(1)?.eq_ignore_ascii_case("ON"),
        None => false,
    })
}

/// A host is ready when it answers and, if it is a Galera node, is synced with the primary
/// component (`wsrep_ready`).
fn node_ready(conn: &mut MySqlConnection) -> BoxFuture<'_, bool> {
    Box::pin(async move {
        match galera_on(conn).await {
            Ok(false) => true,
            Ok(true) => match sqlx::raw_sql(cat::DB_NODE_READY)
                .fetch_optional(&mut *conn)
                .await
            {
                Ok(Some(row)) => row
                    .try_get::<String, _>(1)
                    .is_ok_and(|v| v.eq_ignore_ascii_case("ON")),
                _ => false,
            },
            Err(_) => false,
        }
    })
}

/// How long the cluster-wide migration lock is held at most (a migrator that died leaves it
/// for this long) and waited for.
const CLUSTER_MIGRATION_LEASE: i64 = 600 * 1_000_000;
const CLUSTER_MIGRATION_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What serialises migrators across processes.
enum MigrationLock {
    /// A named lock (`GET_LOCK`), per database, released with the connection at the latest.
    Named,
    /// On a Galera cluster, where `GET_LOCK` locks one node only (or is refused): a row every
    /// node sees, written by an upsert, which certification gives to one writer at a time;
    /// held under this token until released or expired.
    Row(i64),
}

impl MigrationLock {
    /// Waits for the lock (60 s at most): the named lock on `conn`, or on a cluster the lock
    /// row, written through `pool`.
    async fn take(conn: &mut MySqlConnection, pool: &MySqlPool, cluster: bool) -> Result<Self> {
        if !cluster {
            // Lock names are capped at 64 characters in MySQL; two databases sharing a long
            // prefix merely take turns.
            let got: Option<i64> = cat::migration_lock()
                .scalar()
                .fetch_one(&mut *conn)
                .await
                .db()?;
            return match got {
                Some(1) => Ok(MigrationLock::Named),
                _ => Err(Error::Database {
                    kind: DbErrorKind::LockTimeout,
                    source: "timed out waiting for the migration lock (GET_LOCK)".into(),
                }),
            };
        }
        // Created once, before waiting: DDL runs in total order on every node and would abort
        // the lock holder's statements in flight, such as recording a migration it applied.
        shared::retry_transient(|| async {
            sqlx::raw_sql(cat::MIGRATION_LOCK_TABLE)
                .execute(pool)
                .await
                .db()
        })
        .await?;
        let me = shared::new_token();
        let waited = std::time::Instant::now();
        loop {
            match Self::try_row(pool, me).await {
                Ok(true) => return Ok(MigrationLock::Row(me)),
                Ok(false) => {}
                // A statement rolled back by another node's write or DDL (certification, or a
                // replicated transaction that aborted ours): look again.
                Err(Error::Database {
                    kind: DbErrorKind::Deadlock | DbErrorKind::SerializationFailure,
                    ..
                }) => {}
                Err(e) => return Err(e),
            }
            if waited.elapsed() > CLUSTER_MIGRATION_WAIT {
                return Err(Error::Database {
                    kind: DbErrorKind::LockTimeout,
                    source: "timed out waiting for the cluster's migration lock \
                             (backlog_migration_lock)"
                        .into(),
                });
            }
            let pause = 50 + rand::random::<u64>() % 100;
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
        }
    }

    /// One try at the lock row under token `me`: whether it is ours now.
    async fn try_row(pool: &MySqlPool, me: i64) -> Result<bool> {
        let now = backlog_core::now_micros();
        cat::migration_lock_take(me, now + CLUSTER_MIGRATION_LEASE, now)
            .query()
            .execute(pool)
            .await
            .db()?;
        let holder: Option<i64> = cat::migration_lock_holder()
            .scalar()
            .fetch_optional(pool)
            .await
            .db()?;
        Ok(holder == Some(me))
    }

    /// Releases the lock (the row's delete again if another node's write rolled it back).
    async fn release(self, conn: &mut MySqlConnection, pool: &MySqlPool) -> Result<()> {
        match self {
            MigrationLock::Named => {
                cat::migration_unlock().query().execute(conn).await.db()?;
            }
            MigrationLock::Row(me) => {
                shared::retry_transient(|| async {
                    cat::migration_lock_release(me)
                        .query()
                        .execute(pool)
                        .await
                        .db()
                })
                .await?;
            }
        }
        Ok(())
    }
}

/// Locks up to `limit` claimable jobs (SKIP LOCKED) and marks them running, on a connection
/// inside a transaction.
async fn claim_on(
    conn: &mut MySqlConnection,
    shards: &ShardCounts,
    p: &JobClaimParams,
    limit: u32,
) -> Result<Vec<ClaimedJob>> {
    claim_with(conn, shards, p, limit, plain_claim(p.order), true).await
}

/// A claim in a queue with a global concurrency limit or a rate limit, in the caller's
/// transaction: under the queue row's lock, the running jobs counted by a statement that sees
/// what the lock's last holder committed, at most what the limits leave claimed, and the rate
/// limit's bucket stored. On a Galera cluster the lock
/// holds on one node only, so the claim also writes the queue row: two nodes' claims then
/// conflict at certification, and one is retried.
async fn claim_limited_on(
    conn: &mut MySqlConnection,
    shards: &ShardCounts,
    p: &JobClaimParams,
    cluster: bool,
) -> Result<Vec<ClaimedJob>> {
    let queue = p.queue.as_str();
    // On Galera the write comes first, before the limits are read and the running jobs counted,
    // and it is streamed: written at commit only, two nodes' claims could each count before the
    // other's was applied and both commit (6 running under a limit of 3 in 4 of 24 runs of
    // galera::global_concurrency_holds_across_processes alone; written first, in 3 of 22 runs of
    // the Galera flow suite, each time two claims of different nodes holding 3).
    // The write is streamed (replicated and certified as it runs), which locks the row on every
    // node: see session_stream_each_statement.sql.
    if cluster {
        sqlx::raw_sql(cat::SESSION_STREAM_EACH_STATEMENT)
            .execute(&mut *conn)
            .await
            .db()?;
        let written = cat::queue_lock_write(p.now, queue)
            .query()
            .execute(&mut *conn)
            .await
            .db();
        // Off again whatever the write did: the connection goes back to the pool.
        let off = sqlx::raw_sql(cat::SESSION_STREAM_OFF)
            .execute(&mut *conn)
            .await
            .db();
        written?;
        off?;
    }
    let (limits, room) = crate::engine::limited_room!(cat, conn, p);
    if room == 0 {
        return Ok(vec![]);
    }
    let claim: ClaimFn = match p.order {
        Ordering::Fifo => |a| {
            fifo_claim(
                a,
                cat::job_claim_limited_fifo,
                cat::job_claim_limited_twostep_fifo,
            )
        },
        Ordering::Lifo => |a| {
            lifo_claim(
                a,
                cat::job_claim_limited_lifo,
                cat::job_claim_limited_twostep_lifo,
            )
        },
    };
    let jobs = claim_with(conn, shards, p, room as u32, claim, true).await?;
    crate::engine::store_bucket!(cat, conn, p, limits, jobs.len());
    let groups = jobs.iter().filter_map(|j| j.group.clone()).collect();
    crate::engine::store_group_starts!(cat, conn, p, limits, groups, |g| &shared::json_list(&g));
    Ok(jobs)
}

/// The shards of a queue's claim point in the order one claim visits them: from a random one
/// in turn, each once. Once it has visited every shard of the count it started with, it reads
/// the count again (it may have been raised since it was cached) and goes on to the shards not
/// yet visited, so that a claim that comes back short has looked at every shard there is.
struct ShardWalk<'a> {
    shards: &'a ShardCounts,
    n: u16,
    start: u16,
    visited: [bool; 256],
    fresh: bool,
}

impl<'a> ShardWalk<'a> {
    async fn new(
        conn: &mut MySqlConnection,
        shards: &'a ShardCounts,
        queue: &str,
    ) -> Result<ShardWalk<'a>> {
        let n = shards.get(conn, queue).await?;
        Ok(ShardWalk {
            shards,
            n,
            start: random_shard(256) as u16,
            visited: [false; 256],
            fresh: false,
        })
    }

    /// The next shard to claim from, or `None` once every shard was visited.
    async fn next(&mut self, conn: &mut MySqlConnection, queue: &str) -> Result<Option<i32>> {
        loop {
            let n = self.n;
            let next = (0..n)
                .map(|k| (self.start + k) % n)
                .find(|&s| !self.visited[s as usize]);
            match next {
                Some(s) => {
                    self.visited[s as usize] = true;
                    return Ok(Some(i32::from(s)));
                }
                None if self.fresh => return Ok(None),
                None => {
                    self.n = self.shards.read(conn, queue).await?;
                    self.fresh = true;
                }
            }
        }
    }

    /// More than one shard was visited: the jobs came from several heads.
    fn several(&self) -> bool {
        self.visited.iter().filter(|v| **v).count() > 1
    }
}

/// The SELECT of a claim in a queue without limits, in `order`.
fn plain_claim(order: Ordering) -> ClaimFn {
    match order {
        Ordering::Fifo => |a| fifo_claim(a, cat::job_claim_fifo, cat::job_claim_twostep_fifo),
        Ordering::Lifo => |a| lifo_claim(a, cat::job_claim_lifo, cat::job_claim_twostep_lifo),
    }
}

/// A FIFO claim statement (queue, shard, now, kinds, limit, then the cursor's three values).
type FifoStmt =
    fn(&str, i32, i64, Option<&str>, i64, Option<i16>, Option<i64>, Option<i64>) -> Stmt<MySql>;
/// Its two-step form: `candidates` after `limit`.
type FifoTwoStepStmt = fn(
    &str,
    i32,
    i64,
    Option<&str>,
    i64,
    i64,
    Option<i16>,
    Option<i64>,
    Option<i64>,
) -> Stmt<MySql>;

/// A FIFO claim in the form `a` asks for: `locking` or `two_step`.
fn fifo_claim(a: &ClaimArgs, locking: FifoStmt, two_step: FifoTwoStepStmt) -> Stmt<MySql> {
    let (p, r, i) = unzip_key(a.after);
    match a.two_step {
        false => locking(a.queue, a.shard, a.now, a.kinds, a.limit, p, r, i),
        true => two_step(
            a.queue,
            a.shard,
            a.now,
            a.kinds,
            a.limit,
            a.candidates(),
            p,
            r,
            i,
        ),
    }
}

/// A LIFO claim statement (queue, shard, now, kinds, limit; no cursor).
type LifoStmt = fn(&str, i32, i64, Option<&str>, i64) -> Stmt<MySql>;
/// Its two-step form: `candidates` after `limit`.
type LifoTwoStepStmt = fn(&str, i32, i64, Option<&str>, i64, i64) -> Stmt<MySql>;

/// A LIFO claim in the form `a` asks for.
fn lifo_claim(a: &ClaimArgs, locking: LifoStmt, two_step: LifoTwoStepStmt) -> Stmt<MySql> {
    match a.two_step {
        false => locking(a.queue, a.shard, a.now, a.kinds, a.limit),
        true => two_step(a.queue, a.shard, a.now, a.kinds, a.limit, a.candidates()),
    }
}

/// Every `pages_accessed` of an `ANALYZE FORMAT=JSON`, summed.
fn pages_accessed(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::Object(m) => (m.iter())
            .map(|(k, v)| match (k.as_str(), v.as_u64()) {
                ("pages_accessed", Some(n)) => n,
                _ => pages_accessed(v),
            })
            .sum(),
        serde_json::Value::Array(a) => a.iter().map(pages_accessed).sum(),
        _ => 0,
    }
}

/// A cursor as the claim statements bind it: three values, all NULL for the head.
fn unzip_key(key: Option<Key>) -> (Option<i16>, Option<i64>, Option<i64>) {
    key.map_or((None, None, None), |(p, r, i)| (Some(p), Some(r), Some(i)))
}

/// A claim's SELECT on one shard.
type ClaimFn = fn(&ClaimArgs) -> Stmt<MySql>;

/// What a claim's SELECT on one shard binds.
struct ClaimArgs<'a> {
    queue: &'a str,
    shard: i32,
    now: i64,
    /// The kinds as a JSON array, if any.
    kinds: Option<&'a str>,
    limit: i64,
    /// The shard's cursor (FIFO; `None`: from the head).
    after: Option<Key>,
    /// The two-step form (see [`ClaimShape`]).
    two_step: bool,
}

impl ClaimArgs<'_> {
    /// How many of the shard's next keys a two-step claim reads before it locks the first
    /// `limit` that no other claimer holds: room for [`CANDIDATES`] claimers taking the same
    /// head at once without one coming back short. The lock stops at `limit`, so the spare
    /// candidates cost a few index entries each, and no lock.
    fn candidates(&self) -> i64 {
        self.limit * CANDIDATES
    }
}

/// See [`ClaimArgs::candidates`].
const CANDIDATES: i64 = 4;

/// Runs a claim's SELECT … FOR UPDATE SKIP LOCKED on each shard in turn until it has `limit`
/// jobs or has visited every shard, and marks what it locked as running. Each shard's claim
/// starts at its cursor, or at its head on a full pass.
async fn claim_with(
    conn: &mut MySqlConnection,
    shards: &ShardCounts,
    p: &JobClaimParams,
    limit: u32,
    claim: ClaimFn,
    lease: bool,
) -> Result<Vec<ClaimedJob>> {
    let token = shared::new_token();
    let expires = p.now + p.lease.as_micros() as i64;
    let kinds = shared::kinds_json(&p.kinds);
    let queue = p.queue.as_str();
    let mut jobs = Vec::new();
    let mut walk = ShardWalk::new(conn, shards, queue).await?;
    let plan = shards.cursors.plan(queue, &p.kinds, p.order);
    let mut reached = Vec::new();
    while jobs.len() < limit as usize {
        let Some(shard) = walk.next(conn, queue).await? else {
            break;
        };
        let left = (limit as usize - jobs.len()) as i64;
        let two_step = shards.shape.two_step();
        let args = ClaimArgs {
            queue,
            shard,
            now: p.now,
            kinds: kinds.as_deref(),
            limit: left,
            after: plan.key(shard),
            two_step,
        };
        let started = Instant::now();
        let rows = claim(&args).query().fetch_all(&mut *conn).await.db()?;
        shards.shape.took(two_step, started.elapsed());
        for r in &rows {
            jobs.push(claimed_from_row!(r, 0, p, token, expires));
        }
        // In the claim's order: the shard's last job has its largest key.
        if let Some(j) = jobs.last().filter(|_| !rows.is_empty()) {
            reached.push((shard, (j.priority, j.run_at, j.id)));
        }
    }
    shards.cursors.record(&plan, reached);
    if walk.several() {
        crate::rows::sort_claimed(&mut jobs, p.order);
    }
    if jobs.is_empty() || !lease {
        return Ok(jobs);
    }
    let ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
    cat::job_claim_update(token, &p.owner, expires, p.now, &ids)
        .query()
        .execute(&mut *conn)
        .await
        .db()?;
    Ok(jobs)
}

/// Hands the turns of a worker's finished jobs in their ordered groups straight to each group's
/// next job, in the caller's transaction before the completion (`job_handoff_next.sql`, then
/// `job_handoff_take.sql`): the next jobs, claimed under a new lease.
async fn hand_off(
    conn: &mut MySqlConnection,
    p: &JobCompleteClaimParams,
) -> Result<Vec<ClaimedJob>> {
    let c = &p.claim;
    let ids: Vec<i64> = p.complete.jobs.iter().map(|j| j.id).collect();
    let rows: Vec<(i64, Option<i64>, Option<i64>)> = cat::job_handoff_next(c.now, &ids)
        .as_()
        .fetch_all(&mut *conn)
        .await
        .db()?;
    // Only the turns of jobs still running under the caller's own leases.
    let held = |id: i64, token: Option<i64>| {
        (p.complete.jobs.iter()).any(|j| j.id == id && Some(j.token) == token)
    };
    let mut next: Vec<i64> = (rows.into_iter())
        .filter(|&(id, token, _)| held(id, token))
        .filter_map(|(_, _, next)| next)
        .collect();
    next.sort_unstable();
    next.dedup();
    next.truncate(c.limit as usize);
    if next.is_empty() {
        return Ok(vec![]);
    }
    let kinds = shared::kinds_json(&c.kinds);
    let rows = cat::job_handoff_take(&next, kinds.as_deref(), c.queue.as_str())
        .query()
        .fetch_all(&mut *conn)
        .await
        .db()?;
    let (token, expires) = (shared::new_token(), c.now + c.lease.as_micros() as i64);
    let jobs = (rows.iter())
        .map(|r| Ok(claimed_from_row!(r, 0, c, token, expires)))
        .collect::<Result<Vec<_>>>()?;
    if !jobs.is_empty() {
        let ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        cat::job_claim_update(token, &c.owner, expires, c.now, &ids)
            .query()
            .execute(&mut *conn)
            .await
            .db()?;
    }
    Ok(jobs)
}

/// What [`complete_on`] did: the jobs completed, and those it left to a transaction (jobs with
/// dependents, met by the fenced statement of retention `delete` outside one).
#[derive(Default)]
struct Completion {
    done: Vec<JobRef>,
    deferred: Vec<JobRef>,
}

/// Completes the jobs whose token is current. `in_tx`: the connection is inside a transaction,
/// where the children of jobs with dependents are released too (schema version 20); outside one
/// (retention `delete`'s fenced statements run alone), such jobs are left untouched and come back
/// in [`Completion::deferred`] for the caller to complete in one.
async fn complete_on(
    conn: &mut MySqlConnection,
    p: &JobCompleteParams,
    in_tx: bool,
) -> Result<Completion> {
    if p.jobs.is_empty() {
        return Ok(Completion::default());
    }
    if p.retention == Retention::Delete {
        return complete_fenced(conn, p, in_tx).await;
    }
    let asked: Vec<i64> = p.jobs.iter().map(|j| j.id).collect();
    let locked = cat::job_complete_lock(&asked)
        .query()
        .fetch_all(&mut *conn)
        .await
        .db()?;
    let mut ids = Vec::with_capacity(locked.len());
    let mut parents = Vec::new();
    for r in &locked {
        let id: i64 = r.try_get("id").db()?;
        let token: Option<i64> = r.try_get("lease_token").db()?;
        let state: String = r.try_get("state").db()?;
        let current = p.jobs.iter().any(|j| j.id == id && Some(j.token) == token);
        if state == "running" && current {
            ids.push(id);
            if r.try_get::<bool, _>("has_dependents").db()? {
                parents.push((id, "completed"));
            }
        }
    }
    if ids.is_empty() {
        return Ok(Completion::default());
    }
    let delete = || cat::job_complete_delete(&ids).query();
    match p.retention {
        Retention::Delete => {
            delete().execute(&mut *conn).await.db()?;
        }
        // Kept: moved into the ring of completed jobs' tables (schema version 17).
        Retention::Keep => {
            cat::job_complete_keep(p.now, &ids)
                .query()
                .execute(&mut *conn)
                .await
                .db()?;
            delete().execute(&mut *conn).await.db()?;
        }
        Retention::Archive => {
            cat::job_complete_archive(p.now, &ids)
                .query()
                .execute(&mut *conn)
                .await
                .db()?;
            delete().execute(&mut *conn).await.db()?;
        }
    }
    release_children(conn, parents, p.now).await?;
    Ok(Completion {
        done: shared::refs_with_ids(&p.jobs, &ids),
        deferred: vec![],
    })
}

/// Completes under retention `delete` without a locking read first: one fenced statement per
/// lease token (usually one per claimed batch). Only when a statement changes fewer rows than
/// asked does a read find out which jobs had lost their lease, and which have dependents (the
/// statement leaves those alone): completed here inside a transaction (`in_tx`), with their
/// children's release, else deferred to one. (Kept and archived jobs move to another table:
/// locked first, copied, deleted.)
async fn complete_fenced(
    conn: &mut MySqlConnection,
    p: &JobCompleteParams,
    in_tx: bool,
) -> Result<Completion> {
    let mut by_token: Vec<(i64, Vec<i64>)> = vec![];
    for j in &p.jobs {
        match by_token.iter_mut().find(|(t, _)| *t == j.token) {
            Some((_, ids)) => ids.push(j.id),
            None => by_token.push((j.token, vec![j.id])),
        }
    }
    let mut done = Vec::with_capacity(p.jobs.len());
    let mut deferred = Vec::new();
    for (token, mut ids) in by_token {
        ids.sort_unstable();
        let stmt = cat::job_complete_delete_fenced(&ids, token);
        let changed = stmt.query().execute(&mut *conn).await.db()?.rows_affected();
        if changed as usize == ids.len() {
            done.extend(ids);
            continue;
        }
        let parents: Vec<i64> = cat::job_deps_running(&ids, token)
            .scalar()
            .fetch_all(&mut *conn)
            .await
            .db()?;
        ids.retain(|id| !parents.contains(id));
        if !parents.is_empty() {
            if in_tx {
                cat::job_complete_delete(&parents)
                    .query()
                    .execute(&mut *conn)
                    .await
                    .db()?;
                let ended = parents.iter().map(|&id| (id, "completed")).collect();
                release_children(conn, ended, p.now).await?;
                done.extend(&parents);
            } else {
                deferred.extend(parents.iter().map(|&id| JobRef { id, token }));
            }
        }
        if ids.is_empty() {
            continue;
        }
        let lost: Vec<i64> = cat::job_complete_present(&ids, p.now)
            .scalar()
            .fetch_all(&mut *conn)
            .await
            .db()?;
        done.extend(ids.into_iter().filter(|id| !lost.contains(id)));
    }
    Ok(Completion {
        done: shared::refs_with_ids(&p.jobs, &done),
        deferred,
    })
}

/// What the parents ended in one round of [`release_children`] do to one child: how many ended,
/// and the first that failed with policy `cancel` (its id and how it ended), if any.
type ChildEnds = (i32, Option<(i64, &'static str)>);

/// The deepest cascade of cancellations one release follows (a chain of jobs, each waiting for
/// the one before, whose first failed).
const MAX_CASCADE: usize = 1000;

/// What the triggers of PostgreSQL and SQLite do when jobs with dependents end, done here by
/// backlog's statements in the transaction that ended them (schema version 20; MySQL has no
/// trigger condition that spares the other rows). `ended`: each such job and how it ended
/// (`completed`, `dead`, `cancelled`, `deleted`). Per child, the parents ended here are summed;
/// the children still waiting are locked in id order and counted down, made available when none
/// is left (due no earlier than now), or cancelled when a parent failed and the edge's policy is
/// `cancel`, which ends them in turn: the cascade.
pub(crate) async fn release_children(
    conn: &mut MySqlConnection,
    ended: Vec<(i64, &'static str)>,
    now: i64,
) -> Result<()> {
    let mut ended = ended;
    for _ in 0..MAX_CASCADE {
        if ended.is_empty() {
            return Ok(());
        }
        let how: HashMap<i64, &'static str> = ended.iter().copied().collect();
        let mut parents: Vec<i64> = how.keys().copied().collect();
        parents.sort_unstable();
        let mut per_child: std::collections::BTreeMap<i64, ChildEnds> = Default::default();
        for chunk in parents.chunks(batch::INSERT_CHUNK) {
            let edges: Vec<(i64, i64, String)> = cat::job_deps_children(chunk)
                .as_()
                .fetch_all(&mut *conn)
                .await
                .db()?;
            for (parent, child, policy) in edges {
                let entry = per_child.entry(child).or_default();
                entry.0 += 1;
                let h = how[&parent];
                if h != "completed" && policy == "cancel" {
                    entry.1.get_or_insert((parent, h));
                }
            }
        }
        let children: Vec<i64> = per_child.keys().copied().collect();
        let mut next = Vec::new();
        let mut released = Vec::new();
        let mut down: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
        for chunk in children.chunks(batch::INSERT_CHUNK) {
            let locked: Vec<(i64, i32, bool)> = cat::job_deps_lock_children(chunk)
                .as_()
                .fetch_all(&mut *conn)
                .await
                .db()?;
            for (child, left, has_dependents) in locked {
                let (n, cause) = per_child[&child];
                if let Some((parent, h)) = cause {
                    let error = format!("cancelled: job {parent}, which it waited for, ended {h}");
                    cat::job_deps_cancel(now, &error, (left - n).max(0), child)
                        .query()
                        .execute(&mut *conn)
                        .await
                        .db()?;
                    if has_dependents {
                        next.push((child, "cancelled"));
                    }
                } else if left <= n {
                    released.push(child);
                } else {
                    down.entry(n).or_default().push(child);
                }
            }
        }
        for chunk in released.chunks(batch::INSERT_CHUNK) {
            cat::job_deps_release(now, chunk)
                .query()
                .execute(&mut *conn)
                .await
                .db()?;
        }
        for (n, ids) in down {
            for chunk in ids.chunks(batch::INSERT_CHUNK) {
                cat::job_deps_count_down(n, chunk)
                    .query()
                    .execute(&mut *conn)
                    .await
                    .db()?;
            }
        }
        ended = next;
    }
    Err(Error::DependencyInvalid {
        reason: format!("a cascade of cancellations deeper than {MAX_CASCADE} jobs"),
    })
}

impl crate::engine::Releases for MySqlConnection {
    async fn jobs_ended(&mut self, ids: &[i64], how: &'static str, now: i64) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        release_children(self, ids.iter().map(|&id| (id, how)).collect(), now).await
    }
}

/// Deletes (or archives, then deletes) one bounded batch of finished jobs, on a connection inside
/// a transaction; the number removed.
async fn prune_on(
    conn: &mut MySqlConnection,
    p: &JobPruneParams,
    cursors: &Cursors,
) -> Result<u64> {
    let pruned = prune_table_on(conn, p, cursors).await?;
    if p.state != backlog_core::JobState::Completed || pruned >= u64::from(p.limit) {
        return Ok(pruned);
    }
    let left = u64::from(p.limit) - pruned;
    Ok(pruned + prune_done_on(conn, p, left as i64).await?)
}

/// The prune's batch from the ring of completed jobs' tables (version 17): up to `limit` jobs
/// of the queue that finished before the window, locked, archived if asked, deleted.
async fn prune_done_on(conn: &mut MySqlConnection, p: &JobPruneParams, limit: i64) -> Result<u64> {
    let found: Vec<(i64, i64)> =
        cat::job_prune_done_ids(p.queue.as_str(), p.finished_before, limit)
            .as_()
            .fetch_all(&mut *conn)
            .await
            .db()?;
    let mut pruned = 0;
    for slot in 0..DONE_TABLES {
        let ids: Vec<i64> = (found.iter())
            .filter(|(s, _)| *s == i64::from(slot))
            .map(|(_, id)| *id)
            .collect();
        if ids.is_empty() {
            continue;
        }
        let ids: Vec<i64> = cat::job_prune_done_lock(slot, &ids)
            .scalar()
            .fetch_all(&mut *conn)
            .await
            .db()?;
        if ids.is_empty() {
            continue;
        }
        if p.archive {
            let copy = cat::job_prune_done_archive(slot, &ids).query();
            copy.execute(&mut *conn).await.db()?;
        }
        let gone = cat::job_prune_done_delete(slot, &ids).query();
        pruned += gone.execute(&mut *conn).await.db()?.rows_affected();
    }
    Ok(pruned)
}

/// The prune's batch from the job table.
async fn prune_table_on(
    conn: &mut MySqlConnection,
    p: &JobPruneParams,
    cursors: &Cursors,
) -> Result<u64> {
    let (queue, state) = (p.queue.as_str(), p.state.as_str());
    let plan = cursors.floor_plan(Floor::prune(queue, state));
    let (before, limit) = (p.finished_before, p.limit as i64);
    let candidates: Vec<i64> = cat::job_prune_ids(queue, state, before, plan.after, limit)
        .scalar()
        .fetch_all(&mut *conn)
        .await
        .db()?;
    // Whatever the lock then finds: a candidate no longer there was removed already.
    cursors.floor_record(&plan, candidates.iter().copied().max());
    if candidates.is_empty() {
        return Ok(0);
    }
    let ids: Vec<i64> = cat::job_prune_lock(&candidates, state)
        .scalar()
        .fetch_all(&mut *conn)
        .await
        .db()?;
    if ids.is_empty() {
        return Ok(0);
    }
    if p.archive {
        cat::job_prune_archive(&ids)
            .query()
            .execute(&mut *conn)
            .await
            .db()?;
    }
    let res = cat::job_prune_delete(&ids)
        .query()
        .execute(&mut *conn)
        .await
        .db()?;
    Ok(res.rows_affected())
}

struct Inserter<'c> {
    conn: &'c mut MySqlConnection,
    now: i64,
    id_step: Option<i64>,
    /// The backend's counts, or `None` to read each queue's afresh (a caller's transaction).
    shards: Option<&'c ShardCounts>,
}

impl Inserter<'_> {
    /// The `shards` of each queue of `rows`.
    async fn shard_counts<'r>(&mut self, rows: &'r [NewJob]) -> Result<HashMap<&'r str, u16>> {
        let mut counts = HashMap::new();
        for j in rows {
            let queue = j.queue.as_str();
            if !counts.contains_key(queue) {
                let n = match self.shards {
                    Some(cache) => cache.get(self.conn, queue).await?,
                    None => read_shards(self.conn, queue).await?,
                };
                counts.insert(queue, n);
            }
        }
        Ok(counts)
    }
}

/// A job's queue, kind, payload, priority, run_at, max_attempts and trace context, in that
/// order: the first values of a row of job_insert and job_insert_plain.
type JobValues<'a> = (
    &'a str,
    Option<&'a str>,
    &'a str,
    i16,
    i64,
    Option<i32>,
    Option<String>,
);

fn job_values(j: &NewJob, now: i64) -> JobValues<'_> {
    // Borrowed: the values are encoded into the statement's buffer, no copy of their own.
    (
        j.queue.as_str(),
        j.kind.as_ref().map(|k| k.as_str()),
        j.payload.as_str(),
        j.priority,
        j.run_at.unwrap_or(now),
        j.max_attempts,
        j.trace_context.as_ref().map(|t| t.to_json()),
    )
}

impl batch::InsertOps for Inserter<'_> {
    async fn insert(&mut self, rows: &[NewJob]) -> Result<Vec<Option<i64>>> {
        let counts = self.shard_counts(rows).await?;
        let shard = |j: &NewJob| random_shard(counts[j.queue.as_str()]);
        let conn = &mut *self.conn;
        let now = self.now;
        let mut out = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(INSERT_CHUNK) {
            // Without unique keys every row is inserted; with consecutive ids the first is enough.
            // (A single row's id is the statement's own in any auto-increment lock mode.)
            let step = self
                .id_step
                .or((chunk.len() == 1).then_some(1))
                .filter(|_| chunk.iter().all(|j| j.unique_key.is_none()));
            if let Some(step) = step {
                let rows: Vec<_> = chunk
                    .iter()
                    .map(|j| {
                        let (queue, kind, payload, priority, run_at, max_attempts, trace) =
                            job_values(j, now);
                        (
                            queue,
                            kind,
                            payload,
                            priority,
                            run_at,
                            max_attempts,
                            trace,
                            now,
                            shard(j),
                        )
                    })
                    .collect();
                let res = cat::job_insert_plain(&rows)
                    .query()
                    .execute(&mut *conn)
                    .await
                    .db()?;
                let first = res.last_insert_id() as i64;
                out.extend((0..chunk.len() as i64).map(|i| Some(first + i * step)));
                continue;
            }
            let marker = shared::new_token();
            let rows: Vec<_> = chunk
                .iter()
                .map(|j| {
                    let (queue, kind, payload, priority, run_at, max_attempts, trace) =
                        job_values(j, now);
                    let key = j.unique_key.as_ref().map(|k| k.as_str());
                    (
                        queue,
                        kind,
                        payload,
                        priority,
                        run_at,
                        max_attempts,
                        trace,
                        key,
                        now,
                        marker,
                        shard(j),
                    )
                })
                .collect();
            let res = cat::job_insert(&rows)
                .query()
                .execute(&mut *conn)
                .await
                .db()?;
            let first = res.last_insert_id() as i64;
            let mut created = vec![];
            if res.rows_affected() > 0 {
                let found = cat::job_insert_created(first, marker)
                    .as_()
                    .fetch_all(&mut *conn)
                    .await
                    .db()?;
                created = crate::rows::created(found);
                if !created.is_empty() {
                    let ids: Vec<i64> = created.iter().map(|(id, _)| *id).collect();
                    cat::job_insert_unmark(&ids)
                        .query()
                        .execute(&mut *conn)
                        .await
                        .db()?;
                }
            }
            out.extend(assign_ids(&created, &Deduped::slots(chunk)));
        }
        Ok(out)
    }

    async fn find(&mut self, job: &NewJob) -> Result<Option<i64>> {
        crate::engine::ConnOps::find_unique(&mut *self.conn, job).await
    }
}

impl Dialect for MySqlBackend {
    fn releases_children(&self) -> bool {
        false
    }

    /// Per queue with settings, one statement (no LATERAL in MariaDB): a probe of the claim
    /// index above the queue's count.
    async fn job_reshard(&self) -> Result<u64> {
        let queues: Vec<(String, i32)> = cat::queue_shard_counts()
            .as_()
            .fetch_all(&self.pool)
            .await
            .db()?;
        let mut moved = 0;
        for (queue, shards) in queues {
            let res = cat::job_reshard(shards.max(1), &queue, crate::engine::RESHARD_JOBS)
                .query()
                .execute(&self.pool)
                .await
                .db()?;
            moved += res.rows_affected();
        }
        Ok(moved)
    }

    /// A retry (or another action that applies to completed jobs) of a job kept in the ring
    /// moves it back into the job table first, in a transaction of its own: the job is in one
    /// table or the other at every moment.
    async fn admin_prepare(&self, id: i64, from: [&'static str; 3]) -> Result<()> {
        if !from.contains(&"completed") {
            return Ok(());
        }
        let slot: Option<i64> = cat::job_done_slot(id, from[0], from[1], from[2])
            .scalar()
            .fetch_optional(&self.pool)
            .await
            .db()?;
        let Some(slot) = slot.and_then(|s| u8::try_from(s).ok()) else {
            return Ok(());
        };
        let mut tx = self.tx().await.db()?;
        let locked: Option<i64> = cat::job_done_back_lock(slot, id)
            .scalar()
            .fetch_optional(&mut *tx)
            .await
            .db()?;
        if locked.is_some() {
            let back = cat::job_done_back(slot, id).query();
            back.execute(&mut *tx).await.db()?;
            let gone = cat::job_done_back_delete(slot, id).query();
            gone.execute(&mut *tx).await.db()?;
        }
        tx.commit().await.db()
    }

    /// The ring of completed jobs' tables: empties each table completions no longer write
    /// whose newest job finished before the window (archiving what queues now archive), then
    /// turns completions to the next table once the period has passed, if it is empty. DDL,
    /// each statement on a connection of its own that is closed after (DDL commits whatever a
    /// pooled session had open, and the waits are set per session).
    async fn count_fold(&self, _now: i64) -> Result<u64> {
        // MySQL/MariaDB keep no counts (migrations/mysql/0019_counts.sql): nothing to fold.
        Ok(0)
    }

    async fn queue_stats_scan(
        &self,
        queue: Option<&backlog_core::QueueName>,
        now: i64,
    ) -> Result<Vec<(String, backlog_core::QueueStats)>> {
        // The counts are a scan here already.
        backlog_core::Backend::queue_stats(self, queue, now).await
    }

    async fn job_done_turn(&self, p: backlog_core::JobDoneTurnParams) -> Result<u64> {
        let period = p.period.as_micros().clamp(1, i64::MAX as u128) as i64;
        cat::job_done_period(period)
            .query()
            .execute(&self.pool)
            .await
            .db()?;
        let (_, turned_at, view): (i64, i64, Option<String>) = cat::job_done_ring()
            .as_()
            .fetch_one(&self.pool)
            .await
            .db()?;
        let current = view
            .as_deref()
            .and_then(done_table_of)
            .ok_or_else(|| Error::Database {
                kind: backlog_core::DbErrorKind::Other,
                source: format!("backlog_job_done_current names no table of the ring: {view:?}")
                    .into(),
            })?;
        let row = (cat::job_done_newest().query().fetch_one(&self.pool).await).db()?;
        let newest: Vec<Option<i64>> = (0..usize::from(DONE_TABLES))
            .map(|i| row.try_get(i))
            .collect::<std::result::Result<_, _>>()
            .db()?;
        let mut emptied = 0;
        let mut empty: Vec<bool> = newest.iter().map(Option::is_none).collect();
        for slot in 0..DONE_TABLES {
            let past = newest[slot as usize].is_some_and(|t| t < p.finished_before);
            if slot == current || !past {
                continue;
            }
            if self.done_empty(slot).await? {
                emptied += 1;
                empty[slot as usize] = true;
            }
        }
        let next = (current + 1) % DONE_TABLES;
        if p.now - turned_at >= period && empty[next as usize] {
            let mut conn = self.pool.acquire().await.db()?.detach();
            let turned = sqlx::raw_sql(sqlx::AssertSqlSafe(cat::job_done_turn(next)))
                .execute(&mut conn)
                .await;
            conn.close().await.ok();
            match turned {
                Ok(_) => {
                    cat::job_done_turned(p.now)
                        .query()
                        .execute(&self.pool)
                        .await
                        .db()?;
                }
                // Completions that wrote through the view held it a second: next pass.
                Err(sqlx::Error::Database(e)) if mysql_number(&*e) == Some(1205) => {
                    tracing::debug!(error = %e, "backlog: the completed jobs' ring did not turn");
                }
                Err(e) => return Err(e).db(),
            }
        }
        Ok(emptied)
    }

    /// A change of settings reaches this process's next insert and claim at once; other
    /// processes read the new count within `SHARDS_FRESH`.
    fn settings_changed(&self) {
        self.shards.clear();
    }

    fn cursors(&self) -> Option<&Arc<Cursors>> {
        Some(&self.shards.cursors)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            skip_locked: true,
            single_writer: false,
            // Two claimers of 250 drained 1.4× five of 100 at concurrency 500; two of 500,
            // 3× eight of 100 at 1,000 (docs/bench-journal/2026-11-26-mariadb-few-claimers.md).
            // With 16 shards too the bare SQL ran no faster with four or eight loops than with
            // two (docs/bench-journal/2026-11-26-mariadb-shards.md).
            few_claimers: true,
            // A Galera node's row locks hold on that node only: another node could claim the
            // row a transaction-mode job holds.
            row_locks: !self.cluster,
            bounded_tx_claims: !self.cluster,
        }
    }

    async fn begin(&self) -> Result<Box<dyn BackendTx>> {
        Ok(Box::new(SqlTx(self.tx().await.db()?)))
    }

    async fn migrate(&self) -> Result<MigrateReport> {
        let mut conn = self.pool.acquire().await.db()?;
        let lock = MigrationLock::take(&mut conn, &self.pool, self.cluster).await?;
        let applied = Self::migrate_on(&mut conn).await;
        let released = lock.release(&mut conn, &self.pool).await;
        let applied = applied?;
        released?;
        Ok(MigrateReport {
            applied,
            current: crate::SCHEMA_VERSION,
        })
    }

    async fn job_insert(&self, params: JobInsertParams) -> Result<Vec<EnqueueOutcome>> {
        backlog_core::check_dependencies(&params.jobs)?;
        let dedup = Deduped::new(params.jobs);
        // With consecutive ids (or one row) the new ids come from the statement itself.
        if (self.id_step.is_some() || dedup.rows.len() == 1) && batch::one_statement(&dedup.rows) {
            let per_row = shared::retry_transient(|| async {
                let mut conn = self.pool.acquire().await.db()?;
                let mut ins = Inserter {
                    conn: &mut conn,
                    now: params.now,
                    id_step: self.id_step,
                    shards: Some(&self.shards),
                };
                batch::insert_all(&mut ins, &dedup.rows).await
            })
            .await?;
            return Ok(dedup.outcomes(&per_row));
        }
        let per_row = shared::retry_transient(|| async {
            let mut tx = self.tx().await.db()?;
            let mut ins = Inserter {
                conn: &mut tx,
                now: params.now,
                id_step: self.id_step,
                shards: Some(&self.shards),
            };
            let per_row = batch::insert_all(&mut ins, &dedup.rows).await?;
            if batch::any_grouped(&dedup.rows) {
                batch::place_in_groups(&mut *tx, &dedup.rows, &per_row, params.now).await?;
            }
            if batch::any_dependent(&dedup.rows) {
                batch::attach_parents(&mut *tx, &dedup.rows, &per_row, params.now).await?;
            }
            tx.commit().await.db()?;
            Ok(per_row)
        })
        .await?;
        Ok(dedup.outcomes(&per_row))
    }

    async fn job_claim(&self, p: &JobClaimParams) -> Result<Vec<ClaimedJob>> {
        shared::retry_transient(|| self.claim_once(p)).await
    }

    async fn job_claim_tx(&self, p: &JobClaimParams) -> Result<Option<Box<dyn TxClaim>>> {
        shared::tx_claim_limited(p)?;
        if self.cluster {
            return Err(Error::Unsupported(
                "transaction claim mode needs row locks the whole database sees; a Galera \
                 node's row locks hold on that node only",
            ));
        }
        // The claim's SELECT alone: the rows stay locked, unwritten, until the transaction ends,
        // which the server does itself if the client falls silent for a lease.
        let mut tx = SilenceBoundTx::begin(&self.pool, p.lease).await?;
        let claim = plain_claim(p.order);
        let jobs = claim_with(&mut tx, &self.shards, p, p.limit, claim, false).await?;
        if jobs.is_empty() {
            crate::engine::HeldTx::rollback(tx).await?;
            return Ok(None);
        }
        let claim = SqlTxClaim::new(tx, jobs, p.owner.clone(), p.now);
        Ok(Some(Box::new(claim.rewinds(Some(&self.shards.cursors)))))
    }

    async fn job_complete_claim(&self, p: JobCompleteClaimParams) -> Result<CompleteClaimed> {
        if p.complete.jobs.is_empty()
            || p.claim.strategy == ClaimStrategy::ClaimToken
            || p.claim.global_limit
        {
            return backlog_core::complete_then_claim(self, p).await;
        }
        // The completion statements join the claim's transaction: one commit (one log flush)
        // records both. They touch running rows, the claim available ones.
        shared::retry_transient(|| async {
            let mut tx = self.tx().await.db()?;
            let (queue, groups) = (p.claim.queue.as_str(), &p.groups);
            // Each finished job's turn in its ordered group straight to the group's next job,
            // before the completion (which may delete the rows that name the groups).
            let mut claimed = match groups.is_empty() {
                true => vec![],
                false => hand_off(&mut tx, &p).await?,
            };
            let completed = complete_on(&mut tx, &p.complete, true).await?.done;
            // The groups whose turn no job took, under their locks: their next jobs are
            // available to this very claim.
            let left = shared::groups_left(groups, &claimed);
            let promoted = match left.is_empty() {
                true => 0,
                false => {
                    batch::GroupOps::group_promote_on(&mut *tx, queue, &left, p.claim.now).await?
                }
            };
            // A group's next job was enqueued long ago: behind the cursor.
            if promoted > 0 {
                self.shards.cursors.rewind();
            }
            let limit = p.claim.limit.saturating_sub(claimed.len() as u32);
            if limit > 0 {
                let handed = claimed.len();
                claimed.extend(claim_on(&mut tx, &self.shards, &p.claim, limit).await?);
                if handed > 0 {
                    crate::rows::sort_claimed(&mut claimed, p.claim.order);
                }
            }
            tx.commit().await.db()?;
            Ok(CompleteClaimed {
                completed,
                claimed: Ok(claimed),
                promoted,
            })
        })
        .await
    }

    async fn job_complete(&self, p: JobCompleteParams) -> Result<Vec<JobRef>> {
        shared::retry_transient(|| async {
            if p.retention == Retention::Delete {
                // Fenced single statements: no transaction needed around them, but for jobs
                // with dependents, whose children's release goes with their completion.
                let mut conn = self.pool.acquire().await.db()?;
                let mut c = complete_on(&mut conn, &p, false).await?;
                if !c.deferred.is_empty() {
                    let rest = JobCompleteParams {
                        jobs: std::mem::take(&mut c.deferred),
                        ..p.clone()
                    };
                    let mut tx = self.tx().await.db()?;
                    c.done.extend(complete_on(&mut tx, &rest, true).await?.done);
                    tx.commit().await.db()?;
                }
                return Ok(c.done);
            }
            let mut tx = self.tx().await.db()?;
            let done = complete_on(&mut tx, &p, true).await?.done;
            tx.commit().await.db()?;
            Ok(done)
        })
        .await
    }

    async fn group_promote(&self, p: GroupPromoteParams) -> Result<u64> {
        let mut groups = p.groups;
        groups.sort_unstable();
        groups.dedup();
        let mut tx = self.tx().await.db()?;
        let n =
            batch::GroupOps::group_promote_on(&mut *tx, p.queue.as_str(), &groups, p.now).await?;
        tx.commit().await.db()?;
        Ok(n)
    }

    async fn job_heartbeat(&self, p: JobHeartbeatParams) -> Result<bool> {
        let mut conn = self.pool.acquire().await.db()?;
        let res = cat::job_heartbeat(p.lease_expires_at, p.job.id, p.job.token)
            .query()
            .execute(&mut *conn)
            .await
            .db()?;
        shared::fenced(res.rows_affected(), p.job.id)?;
        let flag: Option<i64> = cat::job_heartbeat_cancel(p.job.id, p.job.token)
            .scalar()
            .fetch_optional(&mut *conn)
            .await
            .db()?;
        let flag = flag.ok_or(Error::LeaseLost { job_id: p.job.id })?;
        Ok(flag != 0)
    }

    async fn job_prune(&self, p: JobPruneParams) -> Result<u64> {
        shared::retry_transient(|| async {
            let mut tx = self.tx().await.db()?;
            let n = prune_on(&mut tx, &p, &self.shards.cursors).await?;
            tx.commit().await.db()?;
            Ok(n)
        })
        .await
    }

    async fn job_vacuum(&self, p: JobVacuumParams) -> Result<Option<JobVacuumed>> {
        {
            let c = self.compaction.lock().expect("lock");
            let waiting = c.not_before.is_some_and(|t| Instant::now() < t);
            if self.cluster || c.unsupported || waiting || p.compact_max_live == 0 {
                return Ok(None);
            }
        }
        type Due = (i64, i64, i64, i64, i64);
        let due: std::result::Result<Due, sqlx::Error> =
            cat::job_compact_due().as_().fetch_one(&self.pool).await;
        let (bytes, live, history, oldest_s, holders) = match due {
            Ok(due) => due,
            Err(e) => return self.compact_refused(e).map(|_| None),
        };
        if bytes < COMPACT_MIN_BYTES
            || live.max(0) as u64 > p.compact_max_live
            || oldest_s < COMPACT_OLDEST_S
            || holders > 0
        {
            return Ok(None);
        }
        let mut done = JobVacuumed {
            dead: history.max(0) as u64,
            kept: history.max(0) as u64,
            compacted: None,
            emptied: 0,
        };
        // A connection of its own, closed afterwards: DDL commits whatever a pooled session had.
        let mut conn = self.pool.acquire().await.db()?.detach();
        let rebuilt = sqlx::raw_sql(cat::JOB_COMPACT).execute(&mut conn).await;
        conn.close().await.ok();
        match rebuilt {
            Ok(_) => {
                done.compacted = Some(live.max(0) as u64);
                self.compaction.lock().expect("lock").backoff = Duration::ZERO;
            }
            // Another session held the table (its snapshot may read it again): later.
            Err(sqlx::Error::Database(e)) if mysql_number(&*e) == Some(1205) => {
                let mut c = self.compaction.lock().expect("lock");
                c.backoff = (c.backoff * 2).clamp(COMPACT_BACKOFF.0, COMPACT_BACKOFF.1);
                c.not_before = Some(Instant::now() + c.backoff);
                tracing::debug!(error = %e, "backlog: the job table's rebuild waited in vain");
            }
            Err(e) => self.compact_refused(e)?,
        }
        Ok(Some(done))
    }

    async fn db_oldest_transaction(&self) -> Result<Option<OldestTransaction>> {
        let row: Option<(i64, f64, String, String)> = cat::db_oldest_transaction()
            .as_()
            .fetch_optional(&self.pool)
            .await
            .db()?;
        Ok(crate::engine::oldest_transaction(row))
    }

    async fn leader_elect(&self, p: &LeaderParams) -> Result<Option<i64>> {
        shared::retry_transient(|| async {
            let mut tx = self.tx().await.db()?;
            cat::leader_elect(&p.name, &p.holder, p.now, p.expires_at)
                .query()
                .execute(&mut *tx)
                .await
                .db()?;
            // Our upsert keeps the row locked, so this reads what it left.
            let (holder, term, expires_at): (String, i64, i64) = cat::leader_holder(&p.name)
                .as_()
                .fetch_one(&mut *tx)
                .await
                .db()?;
            tx.commit().await.db()?;
            Ok((holder == p.holder && expires_at == p.expires_at).then_some(term))
        })
        .await
    }

    async fn cron_fire(&self, p: CronFireParams) -> Result<Option<EnqueueOutcome>> {
        let dedup = Deduped::new(vec![p.job.clone()]);
        let per_row = shared::retry_transient(|| async {
            let mut tx = self.tx().await.db()?;
            cat::cron_ensure(&p.name, i64::MIN)
                .query()
                .execute(&mut *tx)
                .await
                .db()?;
            let res = cat::cron_advance(&p.name, p.tick)
                .query()
                .execute(&mut *tx)
                .await
                .db()?;
            if res.rows_affected() == 0 {
                tx.rollback().await.db()?;
                return Ok(None); // already fired
            }
            let mut ins = Inserter {
                conn: &mut tx,
                now: p.now,
                id_step: self.id_step,
                shards: Some(&self.shards),
            };
            let per_row = batch::insert_all(&mut ins, &dedup.rows).await?;
            tx.commit().await.db()?;
            Ok(Some(per_row))
        })
        .await?;
        Ok(per_row.and_then(|r| dedup.outcomes(&r).pop()))
    }

    async fn job_rescue(&self, p: JobRescueParams) -> Result<Vec<Rescued>> {
        // Lock the expired rows first (SKIP LOCKED), then update those by id: one statement would
        // wait on any row a transaction-mode claim holds open.
        let plan = self.shards.cursors.floor_plan(Floor::Rescue);
        let rescued = shared::retry_transient(|| async {
            let mut tx = self.tx().await.db()?;
            let ids: Vec<i64> = cat::job_rescue_ids(p.now, plan.after, p.limit as i64)
                .scalar()
                .fetch_all(&mut *tx)
                .await
                .db()?;
            if ids.is_empty() {
                tx.commit().await.db()?;
                return Ok(vec![]);
            }
            cat::job_rescue(p.now, &ids)
                .query()
                .execute(&mut *tx)
                .await
                .db()?;
            let rows: Vec<(i64, String, i64, bool)> = cat::job_rescued(&ids)
                .as_()
                .fetch_all(&mut *tx)
                .await
                .db()?;
            let parents = (rows.iter())
                .filter(|r| r.2 != 0 && r.3)
                .map(|r| (r.0, "dead"))
                .collect();
            release_children(&mut tx, parents, p.now).await?;
            tx.commit().await.db()?;
            Ok(rows
                .into_iter()
                .map(|(_, queue, dead, _)| Rescued {
                    queue,
                    dead: dead != 0,
                })
                .collect::<Vec<_>>())
        })
        .await?;
        // Below its limit, the pass found every lease expired before `now`.
        let complete = rescued.len() < p.limit as usize;
        self.shards
            .cursors
            .floor_record(&plan, complete.then_some(p.now));
        Ok(rescued)
    }

    async fn job_count_pending(&self, p: &JobCountPendingParams) -> Result<i64> {
        if p.queues.is_empty() {
            return Ok(0);
        }
        let queues: Vec<&str> = p.queues.iter().map(|q| q.as_str()).collect();
        let kinds = shared::kinds_json(&p.kinds);
        cat::job_count_pending(&queues, kinds.as_deref(), p.due_by)
            .scalar()
            .fetch_one(&self.pool)
            .await
            .db()
    }

    async fn queue_redrive(&self, p: QueueRedriveParams) -> Result<u64> {
        let ids: Vec<i64> = cat::queue_dead_ids(p.queue.as_str(), p.limit as i64)
            .scalar()
            .fetch_all(&self.pool)
            .await
            .db()?;
        if ids.is_empty() {
            return Ok(0);
        }
        let redrive = cat::queue_redrive(p.now, &ids).query();
        match redrive.execute(&self.pool).await.db() {
            Ok(r) => Ok(r.rows_affected()),
            // Another job holds one of the unique keys: move the others one at a time.
            Err(e) if shared::is_unique_violation(&e) => {
                shared::redrive_one_by_one(self, &ids, p.now).await
            }
            Err(e) => Err(e),
        }
    }

    async fn audit_add(&self, e: &AuditEntry) -> Result<i64> {
        let (actor, action, queue) = (e.actor.as_str(), e.action.as_str(), e.queue.as_deref());
        let res = cat::audit_add(e.at, actor, action, queue, e.job_id, e.detail.as_str())
            .query()
            .execute(&self.pool)
            .await
            .db()?;
        Ok(res.last_insert_id() as i64)
    }
}

crate::engine::sql_backend!(MySqlBackend, cat);

/// Transactions the caller controls. The caller's session may run at any isolation level (often
/// MySQL's default REPEATABLE READ): the insert path reads unique keys with locking reads and
/// clears its markers by id, so it neither misses rows a snapshot predates nor locks gaps.
impl crate::tx::JobConnection for MySqlConnection {
    async fn backlog_enqueue(
        &mut self,
        jobs: Vec<NewJob>,
        now: i64,
    ) -> Result<Vec<EnqueueOutcome>> {
        backlog_core::check_dependencies(&jobs)?;
        crate::engine::ConnOps::ensure_queues(self, &jobs, now).await?;
        let dedup = Deduped::new(jobs);
        // The auto-increment lock mode is unknown here: ids are read back by marker.
        let mut ins = Inserter {
            conn: self,
            now,
            id_step: None,
            shards: None,
        };
        let per_row = batch::insert_all(&mut ins, &dedup.rows).await?;
        if batch::any_grouped(&dedup.rows) {
            batch::place_in_groups(self, &dedup.rows, &per_row, now).await?;
        }
        if batch::any_dependent(&dedup.rows) {
            batch::attach_parents(self, &dedup.rows, &per_row, now).await?;
        }
        Ok(dedup.outcomes(&per_row))
    }

    async fn backlog_complete(&mut self, params: &JobCompleteParams) -> Result<Vec<JobRef>> {
        Ok(complete_on(self, params, true).await?.done)
    }
}

crate::engine::conn_ops!(MySqlConnection, cat);

/// A row of `group_next.sql`: a group's next job (none when the group has no due waiting one),
/// its group, and the queue's group concurrency and rate limit, as [`batch::Promoted`] has them.
type NextInGroup = (Option<i64>, String, i32, Option<i32>, i64);

impl batch::DepOps for MySqlConnection {
    async fn deps_mark(&mut self, parents: &[i64]) -> Result<Vec<i64>> {
        let mut unfinished = Vec::new();
        for chunk in parents.chunks(batch::INSERT_CHUNK) {
            let rows: Vec<(i64, bool)> = cat::job_deps_lock(chunk)
                .as_()
                .fetch_all(&mut *self)
                .await
                .db()?;
            let unmarked: Vec<i64> = rows.iter().filter(|r| !r.1).map(|r| r.0).collect();
            if !unmarked.is_empty() {
                cat::job_deps_mark(&unmarked)
                    .query()
                    .execute(&mut *self)
                    .await
                    .db()?;
            }
            unfinished.extend(rows.into_iter().map(|r| r.0));
        }
        Ok(unfinished)
    }

    async fn deps_states(&mut self, ids: &[i64]) -> Result<Vec<(i64, String)>> {
        let mut out = Vec::new();
        for chunk in ids.chunks(batch::INSERT_CHUNK) {
            let rows: Vec<(i64, String)> = cat::job_deps_states(chunk)
                .as_()
                .fetch_all(&mut *self)
                .await
                .db()?;
            out.extend(rows);
            let archived: Vec<(i64, String)> = cat::job_deps_states_archived(chunk)
                .as_()
                .fetch_all(&mut *self)
                .await
                .db()?;
            out.extend(archived);
        }
        Ok(out)
    }

    async fn deps_link(&mut self, edges: &[(i64, i64, &'static str)]) -> Result<()> {
        cat::job_deps_link(edges)
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        Ok(())
    }

    async fn deps_wait(&mut self, left: i32, ids: &[i64]) -> Result<()> {
        cat::job_deps_wait(left, ids)
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

impl batch::GroupOps for MySqlConnection {
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

    async fn group_lock(&mut self, queue: &str, groups: &[String]) -> Result<()> {
        let rows: Vec<(&str, &str)> = groups.iter().map(|g| (queue, g.as_str())).collect();
        cat::group_lock(&rows)
            .query()
            .execute(&mut *self)
            .await
            .db()?;
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
            let next: Vec<NextInGroup> = cat::group_next(queue, now, &list)
                .as_()
                .fetch_all(&mut *self)
                .await
                .db()?;
            let rows: Vec<batch::Promoted> = (next.into_iter())
                .filter_map(|(id, group, room, rate, period)| {
                    Some((id?, group, room, rate, period))
                })
                .collect();
            if rows.is_empty() {
                break;
            }
            let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
            promoted += cat::group_make_available(&ids)
                .query()
                .execute(&mut *self)
                .await
                .db()?
                .rows_affected();
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
        let rows: Vec<(&str, &str, i64)> = rates
            .iter()
            .map(|(g, at)| (queue, g.as_str(), *at))
            .collect();
        cat::group_rate_set(&rows)
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        for &(id, run_at) in paced {
            cat::job_pace(run_at, id)
                .query()
                .execute(&mut *self)
                .await
                .db()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_take_two_steps_after_two_slow_locking_claims() {
        let shape = ClaimShape::default();
        let (slow, fast) = (SLOW_CLAIM * 2, Duration::from_millis(1));
        shape.took(false, slow);
        shape.took(false, fast);
        assert!(!shape.two_step(), "one slow claim: noise");
        *shape.last_slow.lock().unwrap() = Some(Instant::now() - SLOW_WITHIN * 2);
        shape.took(false, slow);
        assert!(!shape.two_step(), "the other one too long ago");
        shape.took(false, fast);
        shape.took(false, slow);
        assert!(
            shape.two_step(),
            "two within {SLOW_WITHIN:?}, fast ones between"
        );
        assert_eq!(*shape.stretch.lock().unwrap(), TWO_STEP_FOR);
        // Back to locking claims, slow again at once: a stretch twice as long.
        *shape.two_step_until.lock().unwrap() = Some(Instant::now());
        shape.took(false, slow);
        assert_eq!(*shape.stretch.lock().unwrap(), TWO_STEP_FOR * 2);
        // What two-step claims take does not count.
        *shape.two_step_until.lock().unwrap() = Some(Instant::now());
        assert!(!shape.two_step(), "then the locking read again");
        shape.took(true, slow);
        assert!(!shape.two_step());
    }
}
