//! PostgreSQL: many writers. Claims and rescues use `FOR UPDATE SKIP LOCKED`, batches travel as
//! arrays (`UNNEST`), and transaction claim mode holds a job's row lock in an open transaction.

use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use backlog_core::{
    BackendTx, Capabilities, ClaimStrategy, ClaimedJob, CompleteClaimed, CronFireParams,
    EnqueueOutcome, GroupPromoteParams, JobClaimParams, JobCompleteClaimParams, JobCompleteParams,
    JobCountPendingParams, JobHeartbeatParams, JobInsertParams, JobPruneParams, JobRef,
    JobVacuumParams, JobVacuumed, MigrateReport, NewJob, OldestTransaction, Ordering, Result,
    Retention, TxClaim, WakeFn,
};
use sqlx::postgres::{PgConnectOptions, PgListener};
use sqlx::{Connection, PgConnection, PgPool, Postgres, Row};

use crate::BackendConfig;
use crate::batch::{self, Deduped, INSERT_CHUNK};
use crate::catalog::{Stmt, postgres as cat};
use crate::cursor::{ClaimCost, Cursors, Floor, Plan};
use crate::dberror::{DbResultExt, connect_error, connect_within};
use crate::engine::{Dialect, SqlTx, SqlTxClaim};
use crate::hosts::{self, Hosts};
use crate::pooler::on_pool;
use crate::rows::{
    assign_ids, audit_from_row, claimed_from_row, created, job_from_row, queue_from_row,
    stat_from_row,
};
use crate::shared::{self, Tokens};

/// How long another session's transaction must have held the xmin horizon before the leader
/// compacts the job table (a snapshot that held it that long is what kept the dead rows, not
/// statistics on their way).
const HORIZON_HELD_FOR: Duration = Duration::from_secs(1);

/// A table the leader vacuums: its name, its `VACUUM`, its compaction if it has one.
struct VacuumTarget {
    name: &'static str,
    vacuum: &'static str,
    compact: Option<fn(i64, i32) -> Stmt<Postgres>>,
}

const JOB_TABLE: VacuumTarget = VacuumTarget {
    name: "backlog_job",
    vacuum: cat::JOB_VACUUM,
    compact: Some(cat::job_compact),
};

const DONE_TABLE: VacuumTarget = VacuumTarget {
    name: "backlog_job_done",
    vacuum: cat::JOB_DONE_VACUUM,
    // Not compacted: every completion inserts into it, and a transaction claim whose
    // completion waited behind the compaction's lock past its 50 ms lock timeout ran its jobs
    // again (4,550 of 600,000 in a 5-minute soak). Its rows are the kept window's; under a held
    // snapshot the ones the prune deletes stay on disk until it ends.
    compact: None,
};
/// How long the leader's compaction and emptying wait for a lock, in milliseconds (at least 1).
/// How long the counts' fold waits for a slot's lock (a writer still in it) before it passes
/// over the slot until the next fold: short, since writers that come meanwhile queue behind it.
const COUNT_FOLD_LOCK_WAIT_MS: i32 = 20;

fn lock_wait_ms(p: &JobVacuumParams) -> i32 {
    p.compact_lock_wait.as_millis().clamp(1, i32::MAX as u128) as i32
}

/// The advisory lock migrators take (transaction-scoped): "backlog" in ASCII.
const MIGRATE_LOCK: i64 = 0x0062_6163_6b6c_6f67;

/// The PostgreSQL backend.
#[derive(Debug, Clone)]
pub struct PgBackend {
    pool: PgPool,
    /// Shared by clones: one LISTEN connection per backend, however often `listen` is called.
    notifier: Arc<Notifier>,
    /// Sends the wake-ups of what this backend enqueued, where its connections keep the trigger
    /// quiet (a pool it opened itself); `None` on a caller's pool, where the trigger sends them.
    waker: Option<Arc<Waker>>,
    /// Set once `job_vacuum` found that this database cannot vacuum the job table (no such
    /// statistics or statement, as on some PostgreSQL-compatible databases, or no privilege).
    vacuum_unsupported: Arc<std::sync::atomic::AtomicBool>,
    /// Set once `job_vacuum` found that this database cannot compact the job table (no
    /// `backlog_job_compact`, or no privilege to TRUNCATE it).
    compact_unsupported: Arc<std::sync::atomic::AtomicBool>,
    /// The connections go through a pooler in transaction pooling mode (see `pooler`).
    pooled: bool,
    /// Behind such a pooler, the pool of the direct connection that LISTENs (none: poll).
    listen_pool: Option<PgPool>,
    /// Where this process's FIFO claims start on each shard (see `cursor`).
    cursors: Arc<Cursors>,
}

/// A maintenance statement refused with one of `codes` (SQLSTATE), which retrying does not
/// change: sets `flag` so that it is not tried again and warns once with `what`. Any other error
/// is returned.
fn refused_for_good(
    err: sqlx::Error,
    codes: &[&str],
    flag: &std::sync::atomic::AtomicBool,
    what: &str,
) -> Result<()> {
    let code = match &err {
        sqlx::Error::Database(e) => e.code().unwrap_or_default().into_owned(),
        _ => String::new(),
    };
    if !codes.contains(&code.as_str()) {
        return Err(crate::dberror::db(err));
    }
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    tracing::warn!(error = %err, "{what}");
    Ok(())
}

impl PgBackend {
    /// Connects to the database a `postgres://…` URL names. Connection parameters such as
    /// `options=-c search_path=SCHEMA` are honoured.
    pub async fn connect(url: &str, config: &BackendConfig) -> Result<Self> {
        let (url, params) = crate::pooler::take_url_params(url)?;
        let url = url.as_str();
        let pooled = params
            .transaction_pooler
            .unwrap_or(config.pg_transaction_pooler);
        let listen_url = params.listen_url.or_else(|| config.listen_url.clone());
        if listen_url.is_some() && !pooled {
            return Err(backlog_core::Error::DatabaseUrlInvalid {
                url: crate::redact_url(url),
                reason: "listen_url is for a URL that goes through a transaction pooler \
                         (pooler=transaction); without one, backlog LISTENs on its own pool"
                    .into(),
            });
        }
        // Generic plans: every statement here is a short parameterized look-up whose plan does
        // not depend on the values, and a custom plan per execution re-planned the claim each
        // time, a large part of its cost (figures in
        // docs/bench-journal/figures-behind-the-code.md). No sequential scans: a
        // generic plan lives as long as the connection, and one made while the job table was
        // empty and freshly vacuumed (the planner then takes it for one row) read and sorted the
        // whole table on every claim once it held jobs (docs/explain.md, "Plans made on an empty
        // table"). Every statement here has an index that fits; with this setting the planner
        // takes it whatever the statistics said when the plan was made. No bitmap scans: they
        // return rows out of index order, and a claim's plan made on statistics that took its
        // queue for one row read the queue with one and sorted it; once the queue had a backlog
        // every claim sorted all of it (96,000 rows, 150-450 ms a claim) and a steady producer's
        // queue fell behind for good (docs/explain.md). No JIT: a scan the
        // setting cannot avoid (all of a queue table's few rows) is costed at 10^10, past
        // `jit_above_cost`, and compiling the statement took 300-400 ms of a 0.1 ms statement;
        // no statement here is long enough to gain from JIT.
        fn direct(u: &str) -> Result<PgConnectOptions> {
            let opts = PgConnectOptions::from_str(u).map_err(|e| connect_error(u, e))?;
            Ok(opts.options([
                (QUIET_SETTING, "off"),
                ("plan_cache_mode", "force_generic_plan"),
                ("enable_seqscan", "off"),
                ("enable_bitmapscan", "off"),
                ("jit", "off"),
            ]))
        }
        // Through a pooler: no startup parameters a pooler refuses (PgBouncer takes only a few
        // unless told to ignore others, and then drops them). Each transaction sets generic
        // plans itself (`tx`), and the trigger sends the wake-ups.
        fn through_pooler(u: &str) -> Result<PgConnectOptions> {
            let opts = PgConnectOptions::from_str(u).map_err(|e| connect_error(u, e))?;
            Ok(opts.extra_float_digits(None))
        }
        let parse = if pooled { through_pooler } else { direct };
        let hosts = Hosts::<Postgres>::connect(url, config, parse, writable).await?;
        // One direct connection first: an unreachable server or bad credentials fail at once
        // instead of after the pool's acquire timeout.
        let first = connect_within(
            hosts.current_url(),
            config.connect_timeout,
            PgConnection::connect_with(&hosts.current_options()),
        )
        .await?;
        first.close().await.ok();
        let pool = hosts
            .pool_options(config)
            .connect_lazy_with(hosts.current_options());
        hosts::watch(pool.clone(), hosts, config.host_check_every);
        let mut backend = Self::from_pool(pool);
        if pooled {
            // Statements as they are: the listener runs no prepared statement of backlog's.
            let listen_pool = match listen_url {
                Some(u) => Some(
                    sqlx::postgres::PgPoolOptions::new()
                        .max_connections(1)
                        .acquire_timeout(config.acquire_timeout)
                        .connect_lazy_with(direct(&u)?),
                ),
                None => None,
            };
            return Ok(backend.with_transaction_pooler(listen_pool));
        }
        backend.waker = Some(Arc::new(Waker::default()));
        Ok(backend)
    }

    /// The same backend, for a pool whose connections go through a pooler in transaction
    /// pooling mode (PgBouncer's `pool_mode = transaction`): every statement unnamed and in a
    /// transaction, and LISTEN on `listen_pool`, a pool of direct connections to the server
    /// (`None`: workers poll). The pool's connections must not set session state (no `options`
    /// startup parameter). Wrap it in a [`Deadline`](crate::Deadline) (as
    /// [`SqlBackend::backend`](crate::SqlBackend::backend) and [`connect`](crate::connect) do):
    /// that is what makes each call's statements unnamed.
    pub fn with_transaction_pooler(mut self, listen_pool: Option<PgPool>) -> Self {
        self.pooled = true;
        self.listen_pool = listen_pool;
        self.waker = None;
        self
    }

    /// Begins a transaction; behind a transaction pooler, with generic plans for its statements
    /// (`session_pooled_begin.sql`).
    pub(crate) async fn tx(&self) -> sqlx::Result<sqlx::Transaction<'static, Postgres>> {
        match self.pooled {
            true => crate::begin::begin(&self.pool, Some(cat::SESSION_POOLED_BEGIN)).await,
            false => crate::begin::begin(&self.pool, None).await,
        }
    }

    /// Whether the connections go through a pooler in transaction pooling mode.
    pub fn transaction_pooler(&self) -> bool {
        self.pooled
    }

    /// Behind a transaction pooler, the options of the direct connection (`listen_url`), if
    /// one was given.
    pub fn direct_options(&self) -> Option<PgConnectOptions> {
        self.listen_pool
            .as_ref()
            .map(|p| (*p.connect_options()).clone())
    }

    /// Uses an existing pool (the caller's own sqlx pool).
    pub fn from_pool(pool: PgPool) -> Self {
        PgBackend {
            pool,
            notifier: Arc::default(),
            waker: None,
            vacuum_unsupported: Arc::default(),
            compact_unsupported: Arc::default(),
            pooled: false,
            listen_pool: None,
            cursors: Arc::default(),
        }
    }

    /// Wakes the workers of the queues these jobs went to, after their commit.
    fn woke(&self, jobs: &[NewJob]) {
        if let Some(waker) = &self.waker {
            waker.send(&self.pool, jobs);
        }
    }

    /// Stops `job_vacuum` for good when the database refused it for a reason retrying does not
    /// change (no such statistics view or statement, as on some PostgreSQL-compatible databases,
    /// or no privilege), saying so once; other errors are returned.
    fn vacuum_refused(&self, err: sqlx::Error) -> Result<()> {
        // undefined_table, undefined_object, feature_not_supported, insufficient_privilege,
        // syntax_error.
        let codes = ["42P01", "42704", "0A000", "42501", "42601"];
        let what = "backlog: cannot VACUUM backlog_job; its dead rows are left to autovacuum";
        refused_for_good(err, &codes, &self.vacuum_unsupported, what)
    }

    /// Stops compactions for good when the database refused one for a reason retrying does
    /// not change (no `backlog_job_compact`, no privilege to TRUNCATE), saying so once; other
    /// errors are returned.
    fn compact_refused(&self, err: sqlx::Error) -> Result<()> {
        // undefined_function, feature_not_supported, insufficient_privilege.
        let codes = ["42883", "0A000", "42501"];
        let what = "backlog: cannot compact backlog_job; while another session holds an old \
                    snapshot, its dead rows stay until that session ends";
        refused_for_good(err, &codes, &self.compact_unsupported, what)
    }

    /// One table's part of [`Backend::job_vacuum`]: `VACUUM` past the threshold, then a
    /// compaction when a snapshot that held the horizon kept the dead rows.
    async fn vacuum_table(
        &self,
        t: &VacuumTarget,
        p: &JobVacuumParams,
    ) -> Result<Option<JobVacuumed>> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.vacuum_unsupported.load(Relaxed) {
            return Ok(None);
        }
        let too_many = |(dead, live): (u64, u64)| dead > p.min_dead + live / 10;
        let counts = match self.job_dead_rows(t.name).await {
            Ok(Some(counts)) if too_many(counts) => counts,
            Ok(_) => return Ok(None),
            Err(e) => return self.vacuum_refused(e).map(|_| None),
        };
        // Unprepared: VACUUM cannot run inside the transaction a prepared statement may open.
        if let Err(e) = sqlx::raw_sql(t.vacuum).execute(&self.pool).await {
            return self.vacuum_refused(e).map(|_| None);
        }
        let mut done = JobVacuumed {
            dead: counts.0,
            kept: 0,
            compacted: None,
            emptied: 0,
        };
        // VACUUM leaves the dead rows that another session's snapshot may still see (its
        // statistics then count them): those only a compaction frees.
        let after = self.job_dead_rows(t.name).await.db()?.unwrap_or_default();
        if !too_many(after) {
            return Ok(Some(done));
        }
        done.kept = after.0;
        let Some(compact) = t.compact else {
            return Ok(Some(done));
        };
        if p.compact_max_live == 0
            || after.1 > p.compact_max_live
            || self.compact_unsupported.load(Relaxed)
        {
            return Ok(Some(done));
        }
        // Only for a snapshot that has held the horizon a while: kept dead rows without one are
        // deletions whose statistics arrived after the VACUUM, which the next one takes.
        let held = cat::job_compact_held(HORIZON_HELD_FOR.as_secs_f64() * 1000.0);
        if !on_pool!(self, held.scalar(), fetch_one).db()? {
            return Ok(Some(done));
        }
        let wait = lock_wait_ms(p);
        let stmt = compact(p.compact_max_live.min(i64::MAX as u64) as i64, wait);
        let kept: std::result::Result<Option<i64>, sqlx::Error> =
            on_pool!(self, stmt.scalar(), fetch_one);
        match kept {
            Ok(kept) => done.compacted = kept.map(|n| n.max(0) as u64),
            Err(e) => self.compact_refused(e)?,
        }
        Ok(Some(done))
    }

    /// The ring of completed jobs' partitions (schema version 16): its period set from `p`,
    /// then the partitions the prune left with no row emptied whole (TRUNCATE frees what a
    /// held snapshot keeps VACUUM from freeing). Returns how many it emptied.
    async fn job_done_empty(&self, p: &JobVacuumParams) -> Result<u64> {
        let period = p.done_period.as_micros().clamp(1, i64::MAX as u128) as i64;
        on_pool!(self, cat::job_done_period(period).query(), execute).db()?;
        let wait = lock_wait_ms(p);
        let emptied: i32 = on_pool!(self, cat::job_done_empty(wait).scalar(), fetch_one).db()?;
        Ok(emptied.max(0) as u64)
    }

    /// Dead and live rows of a job table, from its statistics (`None`: none kept yet).
    async fn job_dead_rows(
        &self,
        table: &str,
    ) -> std::result::Result<Option<(u64, u64)>, sqlx::Error> {
        type Counts = Option<(Option<i64>, Option<i64>)>;
        let counts: Counts = on_pool!(self, cat::job_dead_rows(table).as_(), fetch_optional)?;
        let n = |c: Option<i64>| c.unwrap_or(0).max(0) as u64;
        Ok(counts.map(|(dead, live)| (n(dead), n(live))))
    }

    /// One claim-token claim: marks the rows with the token, then reads them, in one
    /// transaction.
    async fn claim_token_once(
        &self,
        p: &JobClaimParams,
        token: i64,
        expires: i64,
        kinds: Option<Vec<String>>,
    ) -> Result<Vec<sqlx::postgres::PgRow>> {
        let mut tx = self.tx().await.db()?;
        claim_stmt(p, true, token, expires, kinds, p.limit, &[])
            .query()
            .execute(&mut *tx)
            .await
            .db()?;
        let rows = cat::job_select_token(expires, token)
            .query()
            .fetch_all(&mut *tx)
            .await
            .db()?;
        tx.commit().await.db()?;
        Ok(rows)
    }

    /// A claim in a queue with a global concurrency limit or a rate limit: under the queue
    /// row's lock, the running jobs counted by a statement that sees what the lock's last holder
    /// committed, at most what the limits leave claimed, and the rate limit's bucket stored.
    async fn claim_limited_once(
        &self,
        p: &JobClaimParams,
        token: i64,
        expires: i64,
        kinds: Option<Vec<String>>,
        cursor: &[i64],
    ) -> Result<Vec<sqlx::postgres::PgRow>> {
        let mut tx = self.tx().await.db()?;
        let queue = p.queue.as_str();
        let (limits, room) = crate::engine::limited_room!(cat, tx, p);
        if room == 0 {
            tx.rollback().await.db()?;
            return Ok(vec![]);
        }
        let (owner, now) = (p.owner.as_str(), p.now);
        let stmt = match p.order {
            Ordering::Fifo => {
                cat::job_claim_limited_fifo(token, owner, expires, now, queue, kinds, room, cursor)
            }
            Ordering::Lifo => {
                cat::job_claim_limited_lifo(token, owner, expires, now, queue, kinds, room)
            }
        };
        let rows = stmt.query().fetch_all(&mut *tx).await.db()?;
        crate::engine::store_bucket!(cat, tx, p, limits, rows.len());
        let groups = (rows.iter())
            .filter_map(|r| r.try_get::<Option<String>, _>("group_key").ok().flatten())
            .collect();
        crate::engine::store_group_starts!(cat, tx, p, limits, groups, |g| g);
        tx.commit().await.db()?;
        Ok(rows)
    }

    /// [`Dialect::job_complete_claim`] for finished jobs of ordered groups, in one transaction:
    /// each group's turn handed straight to its next job (`job_handoff.sql`, claimed here), the
    /// completion and the claim of the rest, then, under their locks, the usual promotion in the
    /// groups whose turn found no job to take it.
    async fn complete_claim_grouped(
        &self,
        p: JobCompleteClaimParams,
        token: i64,
        expires: i64,
        ids: Vec<i64>,
        tokens: Tokens,
    ) -> Result<CompleteClaimed> {
        let c = &p.claim;
        let (queue, kinds) = (c.queue.as_str(), shared::kinds_vec(&c.kinds));
        let plan = self.cursors.plan(queue, &c.kinds, c.order);
        let cursor = plan.flat();
        let each: Vec<i64> = match &tokens {
            Tokens::One(t) => vec![*t; ids.len()],
            Tokens::Each(t) => t.clone(),
        };
        let (retention, done_now) = (p.complete.retention, p.complete.now);
        let (rows, mut handed, promoted) = shared::retry_contended(|| async {
            let mut tx = self.tx().await.db()?;
            let (owner, limit) = (c.owner.as_str(), c.limit as i64);
            let handed = cat::job_handoff(
                token,
                owner,
                expires,
                c.now,
                queue,
                kinds.clone(),
                limit,
                &ids,
                &each,
            )
            .query()
            .fetch_all(&mut *tx)
            .await
            .db()?
            .iter()
            .map(|r| Ok(claimed_from_row!(r, 0, c, token, expires)))
            .collect::<Result<Vec<_>>>()?;
            // The rest of the claim; the completion whatever it finds (the form that does not
            // expect jobs), as the hand-offs count on it.
            let mut rest = c.clone();
            rest.limit = c.limit.saturating_sub(handed.len() as u32);
            let rows = complete_claim_stmt(
                false, &rest, token, expires, retention, &ids, &tokens, done_now, &cursor,
            )
            .query()
            .fetch_all(&mut *tx)
            .await
            .db()?;
            let left = shared::groups_left(&p.groups, &handed);
            let promoted = match left.is_empty() {
                true => 0,
                false => batch::GroupOps::group_promote_on(&mut *tx, queue, &left, c.now).await?,
            };
            tx.commit().await.db()?;
            Ok((rows, handed, promoted))
        })
        .await?;
        advance(&self.cursors, &plan, &rows, 1);
        let (done, claimed) = folded_rows(&rows, c, token, expires)?;
        handed.extend(claimed);
        crate::rows::sort_claimed(&mut handed, c.order);
        if promoted > 0 {
            self.rewind();
        }
        if let (true, Some(waker)) = (promoted > 0, &self.waker) {
            waker.send_queues(&self.pool, vec![queue.to_owned()]);
        }
        Ok(CompleteClaimed {
            completed: shared::refs_with_ids(&p.complete.jobs, &done),
            claimed: Ok(handed),
            promoted,
        })
    }

    /// What the next FIFO claim of `limit` jobs of `queue` costs, in buffers (shared hits and
    /// reads): `EXPLAIN (ANALYZE, BUFFERS)` of the claim (`job_claim_fifo`) from this process's
    /// cursors and from the head, each in a transaction rolled back. For tests and diagnostics.
    #[doc(hidden)]
    pub async fn claim_cost(&self, queue: &str, limit: u32) -> Result<ClaimCost> {
        let from = |plan: Plan| async move {
            let mut tx = self.pool.begin().await.db()?;
            let (now, limit) = (backlog_core::now_micros(), i64::from(limit));
            let stmt =
                cat::job_claim_fifo(0, "claim_cost", 0, now, queue, None, limit, &plan.flat());
            let lines: Vec<String> = (stmt.prefixed("EXPLAIN (ANALYZE, BUFFERS)").scalar())
                .fetch_all(&mut *tx)
                .await
                .db()?;
            tx.rollback().await.db()?;
            Ok::<_, backlog_core::Error>(top_buffers(&lines))
        };
        Ok(ClaimCost {
            cursor: from(Plan::at(self.cursors.keys(queue))).await?,
            full_pass: from(Plan::head()).await?,
        })
    }

    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// The channel the `backlog_notify` trigger (migration 2) signals, with a queue name as payload.
const NOTIFY_CHANNEL: &str = "backlog_job";
/// The setting (migration 3) with which a connection keeps the NOTIFY trigger quiet.
const QUIET_SETTING: &str = "backlog.notify";

/// One task per backend that sends the wake-ups of committed enqueues: queues named while a
/// send is in flight go out together in the next one, so producers never queue up on the
/// database-wide lock a notifying commit takes, and an idle system still wakes at once.
#[derive(Default)]
struct Waker {
    tx: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<Vec<String>>>,
}

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waker").finish_non_exhaustive()
    }
}

impl Waker {
    fn send(&self, pool: &PgPool, jobs: &[NewJob]) {
        let queues: Vec<String> = NewJob::queues_of(jobs)
            .into_iter()
            .map(|q| q.as_str().to_owned())
            .collect();
        self.send_queues(pool, queues);
    }

    fn send_queues(&self, pool: &PgPool, queues: Vec<String>) {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(wake_loop(pool.clone(), rx));
            tx
        });
        // The receiver ends only with the pool; then there is nobody left to wake.
        let _ = tx.send(queues);
    }
}

/// Sends what [`Waker::send`] queued until every backend clone is gone or the pool closes.
async fn wake_loop(pool: PgPool, mut rx: tokio::sync::mpsc::UnboundedReceiver<Vec<String>>) {
    while let Some(first) = rx.recv().await {
        let mut queues = first;
        while let Ok(more) = rx.try_recv() {
            queues.extend(more);
        }
        queues.sort_unstable();
        queues.dedup();
        let names: Vec<&str> = queues.iter().map(String::as_str).collect();
        match cat::notify_queues(&names).query().execute(&pool).await {
            Ok(_) => {}
            Err(sqlx::Error::PoolClosed) => return,
            // Workers poll meanwhile: a lost wake-up delays jobs, never loses them.
            Err(e) => tracing::warn!(error = %e, "backlog: cannot send wake-ups"),
        }
    }
}

/// First and longest wait before reconnecting a lost LISTEN connection.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(10);

/// Who wants wake-ups, and whether the one task that listens for them was started.
#[derive(Default)]
struct Notifier {
    wakes: RwLock<Vec<WakeFn>>,
    started: tokio::sync::Mutex<bool>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.wakes.read().map_or(0, |w| w.len());
        f.debug_struct("Notifier").field("wakes", &n).finish()
    }
}

impl Notifier {
    fn wake(&self, queue: &str) {
        let wakes = self.wakes.read().unwrap_or_else(|e| e.into_inner());
        for wake in wakes.iter() {
            wake(queue);
        }
    }
}

/// A connection from the pool that LISTENs on the channel (it holds one of the pool's slots).
async fn subscribe(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(NOTIFY_CHANNEL).await?;
    Ok(listener)
}

/// Hands every notification to the wake functions until the backend's pool (`owner`) or the
/// listener's (`pool`, the same one unless behind a transaction pooler) closes. A lost
/// connection is replaced (PgListener re-LISTENs on it); after an error the listener is rebuilt
/// with a capped backoff. Notifications sent while no connection listens are lost: workers poll
/// meanwhile.
async fn notify_loop(
    pool: PgPool,
    owner: PgPool,
    mut listener: PgListener,
    notifier: Arc<Notifier>,
) {
    let mut backoff = RECONNECT_MIN;
    loop {
        let received = tokio::select! {
            r = listener.try_recv() => r,
            () = owner.close_event() => {
                // The listener's connection first: closing its pool waits for it.
                drop(listener);
                pool.close().await;
                return;
            }
        };
        match received {
            Ok(Some(n)) => {
                backoff = RECONNECT_MIN;
                notifier.wake(n.payload());
                continue;
            }
            Ok(None) => {
                tracing::warn!("backlog: LISTEN connection lost; reconnected");
                continue;
            }
            Err(sqlx::Error::PoolClosed) => return,
            Err(e) => tracing::warn!(error = %e, "backlog: LISTEN connection failed"),
        }
        drop(listener); // its connection goes back to the pool (after UNLISTEN *)
        listener = loop {
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = pool.close_event() => return,
                () = owner.close_event() => {
                    pool.close().await;
                    return;
                }
            }
            backoff = (backoff * 2).min(RECONNECT_MAX);
            match subscribe(&pool).await {
                Ok(l) => break l,
                Err(_) if pool.is_closed() => return,
                Err(e) => tracing::warn!(
                    error = %e,
                    retry_in = ?backoff,
                    "backlog: cannot LISTEN for new jobs; workers poll until it can"
                ),
            }
        };
    }
}

/// The columns both array insert statements take, $1 to $7: queue, kind, payload, priority,
/// run_at, max_attempts, trace_context.
struct Columns {
    queues: Vec<Option<String>>,
    kinds: Vec<Option<String>>,
    payloads: Vec<Option<String>>,
    priorities: Vec<i16>,
    run_ats: Vec<i64>,
    max_attempts: Vec<Option<i32>>,
    trace_contexts: Vec<Option<String>>,
}

impl Columns {
    fn of(chunk: &[NewJob], now: i64) -> Self {
        let text = |f: fn(&NewJob) -> Option<&str>| -> Vec<Option<String>> {
            chunk.iter().map(|j| f(j).map(str::to_owned)).collect()
        };
        Columns {
            queues: text(|j| Some(j.queue.as_str())),
            kinds: text(|j| j.kind.as_ref().map(|k| k.as_str())),
            payloads: text(|j| Some(j.payload.as_str())),
            priorities: chunk.iter().map(|j| j.priority).collect(),
            run_ats: chunk.iter().map(|j| j.run_at.unwrap_or(now)).collect(),
            max_attempts: chunk.iter().map(|j| j.max_attempts).collect(),
            trace_contexts: chunk
                .iter()
                .map(|j| j.trace_context.as_ref().map(|t| t.to_json()))
                .collect(),
        }
    }
}

struct Inserter<'c> {
    conn: &'c mut PgConnection,
    now: i64,
}

impl batch::InsertOps for Inserter<'_> {
    async fn insert(&mut self, rows: &[NewJob]) -> Result<Vec<Option<i64>>> {
        let (conn, now) = (&mut *self.conn, self.now);
        let mut out = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(INSERT_CHUNK) {
            if let [j] = chunk
                && j.unique_key.is_none()
            {
                let id = cat::job_insert_one(
                    j.queue.as_str(),
                    j.kind.as_ref().map(|k| k.as_str()),
                    j.payload.as_str(),
                    j.priority,
                    j.run_at.unwrap_or(now),
                    j.max_attempts,
                    now,
                    j.trace_context.as_ref().map(|t| t.to_json()),
                )
                .scalar()
                .fetch_one(&mut *conn)
                .await
                .db()?;
                out.push(Some(id));
                continue;
            }
            if let [first, ..] = chunk
                && chunk.len() > 1
                && batch::uniform(chunk)
            {
                let payloads: Vec<&str> = chunk.iter().map(|j| j.payload.as_str()).collect();
                let mut ids: Vec<i64> = cat::job_insert_uniform(
                    first.queue.as_str(),
                    first.kind.as_ref().map(|k| k.as_str()),
                    first.priority,
                    first.run_at.unwrap_or(now),
                    first.max_attempts,
                    now,
                    payloads,
                    first.trace_context.as_ref().map(|t| t.to_json()),
                )
                .scalar()
                .fetch_one(&mut *conn)
                .await
                .db()?;
                // Ids come from one sequence in insertion (input) order.
                ids.sort_unstable();
                out.extend(ids.into_iter().map(Some));
                continue;
            }
            let c = Columns::of(chunk, now);
            if chunk.iter().all(|j| j.unique_key.is_none()) {
                #[rustfmt::skip]
                let stmt = cat::job_insert_plain(
                    c.queues, c.kinds, c.payloads, c.priorities, c.run_ats, c.max_attempts,
                    c.trace_contexts, now,
                );
                let row = stmt.query().fetch_one(&mut *conn).await.db()?;
                let mut ids: Vec<i64> = row.try_get(0).db()?;
                // Ids come from one sequence in insertion (input) order.
                ids.sort_unstable();
                out.extend(ids.into_iter().map(Some));
                continue;
            }
            let keys: Vec<Option<String>> = chunk
                .iter()
                .map(|j| j.unique_key.as_ref().map(|k| k.as_str().to_owned()))
                .collect();
            #[rustfmt::skip]
            let stmt = cat::job_insert(
                c.queues, c.kinds, c.payloads, c.priorities, c.run_ats, c.max_attempts,
                c.trace_contexts, keys, now,
            );
            let rows = stmt.as_().fetch_all(&mut *conn).await.db()?;
            out.extend(assign_ids(&created(rows), &Deduped::slots(chunk)));
        }
        Ok(out)
    }

    async fn find(&mut self, job: &NewJob) -> Result<Option<i64>> {
        crate::engine::ConnOps::find_unique(&mut *self.conn, job).await
    }
}

/// The claim of a strategy (SKIP LOCKED, or the claim-token strategy's marking step) in the
/// queue's order.
fn claim_stmt(
    p: &JobClaimParams,
    by_token: bool,
    token: i64,
    expires: i64,
    kinds: Option<Vec<String>>,
    limit: u32,
    cursor: &[i64],
) -> Stmt<Postgres> {
    let (owner, now, queue, limit) = (p.owner.as_str(), p.now, p.queue.as_str(), limit as i64);
    match (by_token, p.order) {
        (false, Ordering::Fifo) => {
            cat::job_claim_fifo(token, owner, expires, now, queue, kinds, limit, cursor)
        }
        (false, Ordering::Lifo) => {
            cat::job_claim_lifo(token, owner, expires, now, queue, kinds, limit)
        }
        (true, Ordering::Fifo) => {
            cat::job_claim_token_fifo(token, owner, expires, now, queue, kinds, limit)
        }
        (true, Ordering::Lifo) => {
            cat::job_claim_token_lifo(token, owner, expires, now, queue, kinds, limit)
        }
    }
}

/// The buffers (shared hits and reads) of the top node of an `EXPLAIN (ANALYZE, BUFFERS)`
/// in text: its first `Buffers:` line, which counts its children's too.
fn top_buffers(lines: &[String]) -> u64 {
    let Some(line) = lines
        .iter()
        .find(|l| l.trim_start().starts_with("Buffers:"))
    else {
        return 0;
    };
    let count = |name: &str| {
        (line.split([' ', ',']).find_map(|w| w.strip_prefix(name)))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    count("hit=") + count("read=")
}

/// Moves the claim cursors past the jobs `rows` claimed (a claimed job's id in column `at`,
/// its priority and due time where `claimed_from_row!` reads them, its shard by name).
fn advance(cursors: &Cursors, plan: &Plan, rows: &[sqlx::postgres::PgRow], at: usize) {
    cursors.record(
        plan,
        rows.iter().filter_map(|r| {
            let id: i64 = r.try_get::<Option<i64>, _>(at).ok()??;
            let key = (r.try_get(at + 3).ok()?, r.try_get(at + 6).ok()?, id);
            Some((i32::from(r.try_get::<i16, _>("shard").ok()?), key))
        }),
    );
}

/// The completion of a retention, in the form its tokens take (see [`Tokens`]).
fn complete_stmt(retention: Retention, ids: &[i64], tokens: &Tokens, now: i64) -> Stmt<Postgres> {
    match (retention, tokens) {
        (Retention::Delete, Tokens::One(t)) => cat::job_complete_delete_one(ids, *t),
        (Retention::Delete, Tokens::Each(t)) => cat::job_complete_delete(ids, t),
        (Retention::Keep, Tokens::One(t)) => cat::job_complete_keep_one(ids, *t, now),
        (Retention::Keep, Tokens::Each(t)) => cat::job_complete_keep(ids, t, now),
        (Retention::Archive, Tokens::One(t)) => cat::job_complete_archive_one(ids, *t, now),
        (Retention::Archive, Tokens::Each(t)) => cat::job_complete_archive(ids, t, now),
    }
}

/// The rows of a folded completion and claim (`complete_claim_stmt`): the completed ids (column
/// 0, on one row) and the claimed jobs (from column 1), in the claim's order.
fn folded_rows(
    rows: &[sqlx::postgres::PgRow],
    c: &JobClaimParams,
    token: i64,
    expires: i64,
) -> Result<(Vec<i64>, Vec<ClaimedJob>)> {
    // A row for each claimed job (its id in column 1) and done_ids (column 0) on one row:
    // its own, with NULL for the claimed columns, or (expecting jobs) the first claimed one.
    let mut done: Vec<i64> = vec![];
    let mut claimed = Vec::with_capacity(rows.len());
    for r in rows {
        if r.try_get::<Option<i64>, _>(1).db()?.is_some() {
            claimed.push(claimed_from_row!(r, 1, c, token, expires));
        }
        if let Some(ids) = r.try_get::<Option<Vec<i64>>, _>(0).db()? {
            done = ids;
        }
    }
    crate::rows::sort_claimed(&mut claimed, c.order);
    Ok((done, claimed))
}

/// A completion and a SKIP LOCKED claim as one statement: `job_complete_with_claim_*` for a queue
/// expected to have jobs, `job_complete_then_claim_*` otherwise. Never for archiving, a
/// data-modifying WITH of its own, which cannot nest in another (`job_complete_claim` sends it
/// apart).
#[allow(clippy::too_many_arguments)]
#[rustfmt::skip]
fn complete_claim_stmt(
    expect_jobs: bool,
    c: &JobClaimParams,
    token: i64,
    expires: i64,
    retention: Retention,
    ids: &[i64],
    tokens: &Tokens,
    done_now: i64,
    cursor: &[i64],
) -> Stmt<Postgres> {
    use Ordering::{Fifo, Lifo};
    use Retention::{Delete, Keep};
    use Tokens::{Each, One};
    let kinds = shared::kinds_vec(&c.kinds);
    let (owner, now, queue, limit) = (c.owner.as_str(), c.now, c.queue.as_str(), c.limit as i64);
    macro_rules! folded {
        ($statement:ident, $($done:expr),+) => {
            cat::$statement(token, owner, expires, now, queue, kinds, limit, $($done),+)
        };
    }
    match (expect_jobs, retention, tokens, c.order) {
        (true, Delete, One(t), Fifo) => folded!(job_complete_with_claim_delete_one_fifo, ids, *t, cursor),
        (true, Delete, One(t), Lifo) => folded!(job_complete_with_claim_delete_one_lifo, ids, *t),
        (true, Delete, Each(t), Fifo) => folded!(job_complete_with_claim_delete_fifo, ids, t, cursor),
        (true, Delete, Each(t), Lifo) => folded!(job_complete_with_claim_delete_lifo, ids, t),
        (true, Keep, One(t), Fifo) => folded!(job_complete_with_claim_keep_one_fifo, ids, *t, done_now, cursor),
        (true, Keep, One(t), Lifo) => folded!(job_complete_with_claim_keep_one_lifo, ids, *t, done_now),
        (true, Keep, Each(t), Fifo) => folded!(job_complete_with_claim_keep_fifo, ids, t, done_now, cursor),
        (true, Keep, Each(t), Lifo) => folded!(job_complete_with_claim_keep_lifo, ids, t, done_now),
        (false, Delete, One(t), Fifo) => folded!(job_complete_then_claim_delete_one_fifo, ids, *t, cursor),
        (false, Delete, One(t), Lifo) => folded!(job_complete_then_claim_delete_one_lifo, ids, *t),
        (false, Delete, Each(t), Fifo) => folded!(job_complete_then_claim_delete_fifo, ids, t, cursor),
        (false, Delete, Each(t), Lifo) => folded!(job_complete_then_claim_delete_lifo, ids, t),
        (false, Keep, One(t), Fifo) => folded!(job_complete_then_claim_keep_one_fifo, ids, *t, done_now, cursor),
        (false, Keep, One(t), Lifo) => folded!(job_complete_then_claim_keep_one_lifo, ids, *t, done_now),
        (false, Keep, Each(t), Fifo) => folded!(job_complete_then_claim_keep_fifo, ids, t, done_now, cursor),
        (false, Keep, Each(t), Lifo) => folded!(job_complete_then_claim_keep_lifo, ids, t, done_now),
        (_, Retention::Archive, _, _) => unreachable!("archiving is never folded into a claim"),
    }
}

/// The operations transaction claim mode shares with the pool path, on one connection.
async fn complete_on(conn: &mut PgConnection, p: &JobCompleteParams) -> Result<Vec<JobRef>> {
    let mut done: Vec<i64> = Vec::with_capacity(p.jobs.len());
    // One statement per set of distinct ids (a job appears twice only when a process completes
    // an expired lease of a job beside its new one, where only the newer token can match).
    let mut rest: Vec<JobRef> = p.jobs.clone();
    while !rest.is_empty() {
        let mut seen = std::collections::HashSet::with_capacity(rest.len());
        let (batch, again): (Vec<JobRef>, Vec<JobRef>) =
            rest.into_iter().partition(|j| seen.insert(j.id));
        let ids: Vec<i64> = batch.iter().map(|j| j.id).collect();
        let tokens = Tokens::of(&batch);
        let query = complete_stmt(p.retention, &ids, &tokens, p.now).scalar::<i64>();
        done.extend(query.fetch_all(&mut *conn).await.db()?);
        rest = again;
    }
    Ok(shared::refs_with_ids(&p.jobs, &done))
}

// Ids as the arrays `= ANY` takes.
crate::engine::locked_ops!(PgConnection, cat, std::convert::identity);

/// A host is ready when it answers and takes writes (not a standby in recovery).
fn writable(conn: &mut PgConnection) -> futures::future::BoxFuture<'_, bool> {
    // Unprepared: one round trip that a transaction pooler keeps on one server connection.
    Box::pin(async move {
        let row = sqlx::raw_sql(cat::DB_WRITABLE).fetch_one(&mut *conn).await;
        row.and_then(|r| r.try_get::<bool, _>(0)).unwrap_or(false)
    })
}

impl Dialect for PgBackend {
    fn cursors(&self) -> Option<&Arc<Cursors>> {
        Some(&self.cursors)
    }

    fn tx_per_statement(&self) -> bool {
        self.pooled
    }

    fn stat_lock_timeout(&self) -> Option<&'static str> {
        Some(cat::SESSION_STAT_LOCK_TIMEOUT)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            skip_locked: true,
            single_writer: false,
            few_claimers: false,
            row_locks: true,
            bounded_tx_claims: true,
        }
    }

    async fn begin(&self) -> Result<Box<dyn BackendTx>> {
        Ok(Box::new(SqlTx(self.tx().await.db()?)))
    }

    async fn migrate(&self) -> Result<MigrateReport> {
        let mut tx = self.tx().await.db()?;
        // First: concurrent migrators queue here, so even CREATE TABLE IF NOT EXISTS cannot race
        // (it is not safe against a concurrent create). Released at commit or rollback.
        cat::migration_lock(MIGRATE_LOCK)
            .query()
            .execute(&mut *tx)
            .await
            .db()?;
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
        // Behind a transaction pooler every statement needs a transaction: the one below.
        if batch::one_statement(&dedup.rows) && !self.pooled {
            let mut conn = self.pool.acquire().await.db()?;
            let per_row = batch::insert_all(
                &mut Inserter {
                    conn: &mut conn,
                    now,
                },
                &dedup.rows,
            )
            .await?;
            drop(conn);
            self.woke(&dedup.rows);
            return Ok(dedup.outcomes(&per_row));
        }
        // Rows go in input order, so producers whose batches share unique keys in different
        // orders can deadlock; the batch rolled back whole and is retried.
        let per_row = shared::retry_transient(|| async {
            let mut tx = self.tx().await.db()?;
            let per_row =
                batch::insert_all(&mut Inserter { conn: &mut tx, now }, &dedup.rows).await?;
            if batch::any_grouped(&dedup.rows) {
                batch::place_in_groups(&mut *tx, &dedup.rows, &per_row, now).await?;
            }
            if batch::any_dependent(&dedup.rows) {
                batch::attach_parents(&mut *tx, &dedup.rows, &per_row, now).await?;
            }
            tx.commit().await.db()?;
            Ok(per_row)
        })
        .await?;
        self.woke(&dedup.rows);
        Ok(dedup.outcomes(&per_row))
    }

    async fn job_claim(&self, p: &JobClaimParams) -> Result<Vec<ClaimedJob>> {
        let token = shared::new_token();
        let expires = p.now + p.lease.as_micros() as i64;
        let kinds = shared::kinds_vec(&p.kinds);
        // The claim-token strategy's rows come back from a second statement: no cursor.
        let plan = match p.strategy {
            ClaimStrategy::ClaimToken if !p.global_limit => Plan::head(),
            _ => self.cursors.plan(p.queue.as_str(), &p.kinds, p.order),
        };
        let cursor = plan.flat();
        let rows = match p.strategy {
            _ if p.global_limit => {
                shared::retry_transient(|| {
                    self.claim_limited_once(p, token, expires, kinds.clone(), &cursor)
                })
                .await?
            }
            ClaimStrategy::SingleWriter | ClaimStrategy::SkipLocked => on_pool!(
                self,
                claim_stmt(p, false, token, expires, kinds, p.limit, &cursor).query(),
                fetch_all
            )
            .db()?,
            ClaimStrategy::ClaimToken => {
                // Claim-token claimers wait on rows instead of skipping them, and a row whose
                // recheck failed stays locked to the end of the claim; rows are taken in id
                // order, but a completion whose plan visits rows in another order can still
                // close a cycle. The deadlock victim's transaction changed nothing: it goes again.
                shared::retry_transient(|| self.claim_token_once(p, token, expires, kinds.clone()))
                    .await?
            }
        };
        advance(&self.cursors, &plan, &rows, 0);
        let mut jobs = rows
            .iter()
            .map(|r| Ok(claimed_from_row!(r, 0, p, token, expires)))
            .collect::<Result<Vec<_>>>()?;
        crate::rows::sort_claimed(&mut jobs, p.order);
        Ok(jobs)
    }

    async fn job_claim_tx(&self, p: &JobClaimParams) -> Result<Option<Box<dyn TxClaim>>> {
        shared::tx_claim_limited(p)?;
        let (token, expires) = (shared::new_token(), p.now + p.lease.as_micros() as i64);
        let plan = self.cursors.plan(p.queue.as_str(), &p.kinds, p.order);
        let cursor = plan.flat();
        // The claim locks the rows and writes nothing; the lock lasts until the transaction
        // ends, and dies with the connection. A claim that gave up waiting (lock_timeout, see
        // the statement) ends its transaction and runs again in a new one.
        let (tx, rows) = shared::retry_contended(|| async {
            let mut tx = self.tx().await.db()?;
            let (queue, kinds) = (p.queue.as_str(), shared::kinds_vec(&p.kinds));
            let idle_ms = p.lease.as_millis().clamp(1, i32::MAX as u128) as i64;
            let (now, limit) = (p.now, p.limit as i64);
            let stmt = match p.order {
                Ordering::Fifo => {
                    cat::job_claim_locked_fifo(now, queue, kinds, limit, idle_ms, &cursor)
                }
                Ordering::Lifo => cat::job_claim_locked_lifo(now, queue, kinds, limit, idle_ms),
            };
            let rows = stmt.query().fetch_all(&mut *tx).await.db()?;
            Ok((tx, rows))
        })
        .await?;
        advance(&self.cursors, &plan, &rows, 0);
        if rows.is_empty() {
            tx.rollback().await.db()?;
            return Ok(None);
        }
        let mut jobs = (rows.iter())
            .map(|r| Ok(claimed_from_row!(r, 0, p, token, expires)))
            .collect::<Result<Vec<_>>>()?;
        crate::rows::sort_claimed(&mut jobs, p.order);
        let claim = SqlTxClaim::new(tx, jobs, p.owner.clone(), p.now);
        Ok(Some(Box::new(claim.rewinds(Some(&self.cursors)))))
    }

    async fn job_complete(&self, p: JobCompleteParams) -> Result<Vec<JobRef>> {
        shared::retry_transient(|| async {
            if self.pooled {
                let mut tx = self.tx().await.db()?;
                let done = complete_on(&mut tx, &p).await?;
                tx.commit().await.db()?;
                return Ok(done);
            }
            let mut conn = self.pool.acquire().await.db()?;
            complete_on(&mut conn, &p).await
        })
        .await
    }

    async fn job_complete_claim(&self, p: JobCompleteClaimParams) -> Result<CompleteClaimed> {
        if p.complete.jobs.is_empty() {
            return backlog_core::complete_then_claim(self, p).await;
        }
        let tokens = Tokens::of(&p.complete.jobs);
        // Two statements for archiving, a data-modifying WITH of its own that cannot nest in
        // another, for the claim-token strategy, and under a global limit (its own transaction).
        if p.complete.retention == Retention::Archive
            || p.claim.global_limit
            || !matches!(
                p.claim.strategy,
                ClaimStrategy::SkipLocked | ClaimStrategy::SingleWriter
            )
        {
            return backlog_core::complete_then_claim(self, p).await;
        }
        // One statement per set of distinct ids, as in `complete_on`: a job twice in one call
        // (an expired lease beside its new one) is completed by the plain statement. One token
        // means one claim, whose ids are distinct: no set to build on the usual path.
        let distinct = matches!(tokens, Tokens::One(_))
            || p.complete.jobs.len()
                == p.complete
                    .jobs
                    .iter()
                    .map(|j| j.id)
                    .collect::<std::collections::HashSet<_>>()
                    .len();
        if !distinct {
            return backlog_core::complete_then_claim(self, p).await;
        }
        let c = &p.claim;
        let token = shared::new_token();
        let expires = c.now + c.lease.as_micros() as i64;
        let ids: Vec<i64> = p.complete.jobs.iter().map(|j| j.id).collect();
        let (expect, retention, done_now) = (p.expect_jobs, p.complete.retention, p.complete.now);
        if !p.groups.is_empty() {
            return self
                .complete_claim_grouped(p, token, expires, ids, tokens)
                .await;
        }
        let plan = self.cursors.plan(c.queue.as_str(), &c.kinds, c.order);
        let cursor = plan.flat();
        let rows = shared::retry_contended(|| async {
            let stmt = complete_claim_stmt(
                expect, c, token, expires, retention, &ids, &tokens, done_now, &cursor,
            );
            on_pool!(self, stmt.query(), fetch_all).db()
        })
        .await?;
        advance(&self.cursors, &plan, &rows, 1);
        let (done, claimed) = folded_rows(&rows, c, token, expires)?;
        let completed = match rows.is_empty() && p.expect_jobs {
            // The claim found nothing, so the completion changed nothing: it goes alone.
            true => Dialect::job_complete(self, p.complete).await?,
            false => shared::refs_with_ids(&p.complete.jobs, &done),
        };
        Ok(CompleteClaimed {
            completed,
            claimed: Ok(claimed),
            promoted: 0,
        })
    }

    async fn group_promote(&self, p: GroupPromoteParams) -> Result<u64> {
        let mut groups = p.groups;
        groups.sort_unstable();
        groups.dedup();
        let mut tx = self.tx().await.db()?;
        let n =
            batch::GroupOps::group_promote_on(&mut *tx, p.queue.as_str(), &groups, p.now).await?;
        tx.commit().await.db()?;
        // Promoted jobs are new work for every process's workers, as an insert is.
        if let (true, Some(waker)) = (n > 0, &self.waker) {
            waker.send_queues(&self.pool, vec![p.queue.as_str().to_owned()]);
        }
        Ok(n)
    }

    async fn job_heartbeat(&self, p: JobHeartbeatParams) -> Result<bool> {
        let heartbeat = cat::job_heartbeat(p.lease_expires_at, p.job.id, p.job.token);
        let cancel: Option<bool> = on_pool!(self, heartbeat.scalar(), fetch_optional).db()?;
        cancel.ok_or(backlog_core::Error::LeaseLost { job_id: p.job.id })
    }

    async fn job_prune(&self, p: JobPruneParams) -> Result<u64> {
        // One statement either way: archiving moves the batch with a data-modifying CTE.
        let statement = match p.archive {
            true => cat::job_prune_archive,
            false => cat::job_prune_delete,
        };
        let (queue, state) = (p.queue.as_str(), p.state.as_str());
        let plan = self.cursors.floor_plan(Floor::prune(queue, state));
        let stmt = statement(queue, state, p.finished_before, p.limit as i64, plan.after);
        let ids: Vec<i64> = on_pool!(self, stmt.scalar(), fetch_all).db()?;
        self.cursors.floor_record(&plan, ids.iter().copied().max());
        let pruned = ids.len() as u64;
        if p.state != backlog_core::JobState::Completed || pruned >= u64::from(p.limit) {
            return Ok(pruned);
        }
        // Completed jobs kept apart (schema version 15): the rest of the batch from there.
        let statement = match p.archive {
            true => cat::job_prune_done_archive,
            false => cat::job_prune_done,
        };
        let plan = self.cursors.floor_plan(Floor::Done {
            queue: queue.to_owned(),
        });
        let limit = (u64::from(p.limit) - pruned) as i64;
        let stmt = statement(queue, p.finished_before, limit, plan.after);
        let finished: Vec<i64> = on_pool!(self, stmt.scalar(), fetch_all).db()?;
        self.cursors
            .floor_record(&plan, finished.iter().copied().max());
        Ok(pruned + finished.len() as u64)
    }

    async fn job_vacuum(&self, p: JobVacuumParams) -> Result<Option<JobVacuumed>> {
        // The job table, then the completed jobs kept apart (schema version 15), whose prune
        // leaves dead rows as completions leave them in the job table.
        let hot = self.vacuum_table(&JOB_TABLE, &p).await?;
        let done = self.vacuum_table(&DONE_TABLE, &p).await?;
        let emptied = self.job_done_empty(&p).await?;
        let vacuumed = match (hot, done) {
            (Some(a), Some(b)) => Some(JobVacuumed {
                dead: a.dead + b.dead,
                kept: a.kept + b.kept,
                compacted: match (a.compacted, b.compacted) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                },
                emptied: 0,
            }),
            (a, b) => a.or(b),
        };
        Ok(match (vacuumed, emptied) {
            (None, 0) => None,
            (v, emptied) => Some(JobVacuumed {
                emptied,
                ..v.unwrap_or_default()
            }),
        })
    }

    async fn queue_stats_scan(
        &self,
        queue: Option<&backlog_core::QueueName>,
        now: i64,
    ) -> Result<Vec<(String, backlog_core::QueueStats)>> {
        let stmt = cat::queue_stats_scan(now, queue.map(|q| q.as_str()));
        crate::engine::stats_from!(self, cat, queue, stmt)
    }

    async fn count_fold(&self, _now: i64) -> Result<u64> {
        let stmt = cat::count_fold(COUNT_FOLD_LOCK_WAIT_MS);
        let folded: i32 = on_pool!(self, stmt.scalar(), fetch_one).db()?;
        Ok(folded.max(0) as u64)
    }

    async fn job_reshard(&self) -> Result<u64> {
        let moved = on_pool!(
            self,
            cat::job_reshard(crate::engine::RESHARD_JOBS).query(),
            execute
        );
        Ok(moved.db()?.rows_affected())
    }

    async fn db_oldest_transaction(&self) -> Result<Option<OldestTransaction>> {
        let row: Option<(i64, f64, String, String)> =
            on_pool!(self, cat::db_oldest_transaction().as_(), fetch_optional).db()?;
        Ok(crate::engine::oldest_transaction(row))
    }

    async fn cron_fire(&self, p: CronFireParams) -> Result<Option<EnqueueOutcome>> {
        let mut tx = self.tx().await.db()?;
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
        self.woke(&dedup.rows);
        Ok(dedup.outcomes(&per_row).pop())
    }

    async fn listen(&self, wake: WakeFn) -> Result<bool> {
        let pool = match (&self.listen_pool, self.pooled) {
            (Some(direct), true) => direct,
            // Through a transaction pooler a notification reaches whichever client next holds
            // the server connection: poll.
            (None, true) => return Ok(false),
            _ if self.pool.options().get_max_connections() < 2 => {
                return Ok(false); // the LISTEN connection would starve everything else: poll
            }
            _ => &self.pool,
        };
        let mut started = self.notifier.started.lock().await;
        if !*started {
            // LISTEN before returning, so that jobs inserted after this call wake `wake`.
            let listener = subscribe(pool).await.db()?;
            let notifier = self.notifier.clone();
            tokio::spawn(notify_loop(
                pool.clone(),
                self.pool.clone(),
                listener,
                notifier,
            ));
            *started = true;
        }
        self.notifier
            .wakes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(wake);
        Ok(true)
    }

    async fn job_count_pending(&self, p: &JobCountPendingParams) -> Result<i64> {
        let names: Vec<&str> = p.queues.iter().map(|q| q.as_str()).collect();
        let stmt = cat::job_count_pending(&names, shared::kinds_vec(&p.kinds), p.due_by);
        on_pool!(self, stmt.scalar(), fetch_one).db()
    }

    crate::engine::returning_methods!(cat);
}

crate::engine::sql_backend!(PgBackend, cat);

/// Enqueue and complete inside the caller's transaction: `&mut *tx` of a `Transaction<Postgres>`.
impl crate::tx::JobConnection for PgConnection {
    async fn backlog_enqueue(
        &mut self,
        jobs: Vec<NewJob>,
        now: i64,
    ) -> Result<Vec<EnqueueOutcome>> {
        crate::engine::ConnOps::ensure_queues(self, &jobs, now).await?;
        // No deadlock retry here, unlike job_insert: the transaction is the caller's to retry.
        backlog_core::check_dependencies(&jobs)?;
        let dedup = Deduped::new(jobs);
        let per_row = batch::insert_all(&mut Inserter { conn: self, now }, &dedup.rows).await?;
        if batch::any_grouped(&dedup.rows) {
            batch::place_in_groups(self, &dedup.rows, &per_row, now).await?;
        }
        if batch::any_dependent(&dedup.rows) {
            batch::attach_parents(self, &dedup.rows, &per_row, now).await?;
        }
        // Delivered when the caller commits (and dropped with a rollback). On a connection that
        // keeps the trigger quiet this is the only wake-up; on another, PostgreSQL folds it into
        // the trigger's identical one.
        let mut queues: Vec<&str> = dedup.rows.iter().map(|j| j.queue.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        cat::notify_queues(&queues)
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        Ok(dedup.outcomes(&per_row))
    }

    async fn backlog_complete(&mut self, params: &JobCompleteParams) -> Result<Vec<JobRef>> {
        complete_on(self, params).await
    }
}

crate::engine::conn_ops!(PgConnection, cat);

/// The database's triggers release the children of jobs that end (schema version 20).
impl crate::engine::Releases for PgConnection {
    async fn jobs_ended(&mut self, _ids: &[i64], _how: &'static str, _now: i64) -> Result<()> {
        Ok(())
    }
}

impl batch::DepOps for PgConnection {
    async fn deps_mark(&mut self, parents: &[i64]) -> Result<Vec<i64>> {
        cat::job_deps_mark(parents)
            .scalar()
            .fetch_all(&mut *self)
            .await
            .db()
    }

    async fn deps_states(&mut self, ids: &[i64]) -> Result<Vec<(i64, String)>> {
        cat::job_deps_states(ids)
            .as_()
            .fetch_all(&mut *self)
            .await
            .db()
    }

    async fn deps_link(&mut self, edges: &[(i64, i64, &'static str)]) -> Result<()> {
        let parents: Vec<i64> = edges.iter().map(|e| e.0).collect();
        let children: Vec<i64> = edges.iter().map(|e| e.1).collect();
        let policies: Vec<String> = edges.iter().map(|e| e.2.to_owned()).collect();
        cat::job_deps_link(&parents, &children, policies)
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

impl batch::GroupOps for PgConnection {
    async fn group_set(&mut self, ids: &[i64], groups: &[String]) -> Result<()> {
        cat::job_group_set(ids, groups.to_vec())
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        Ok(())
    }

    async fn group_lock(&mut self, queue: &str, groups: &[String]) -> Result<()> {
        cat::group_lock(queue, groups.to_vec())
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
        let mut promoted = 0;
        for _ in 0..batch::PROMOTE_ROUNDS {
            let rows: Vec<batch::Promoted> = cat::group_promote(queue, groups.to_vec(), now)
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
        cat::group_rate_get(queue, groups.to_vec())
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
        let (groups, ats): (Vec<String>, Vec<i64>) = rates.iter().cloned().unzip();
        cat::group_rate_set(queue, groups, &ats)
            .query()
            .execute(&mut *self)
            .await
            .db()?;
        if !paced.is_empty() {
            let (ids, run_ats): (Vec<i64>, Vec<i64>) = paced.iter().copied().unzip();
            cat::job_pace(&ids, &run_ats)
                .query()
                .execute(&mut *self)
                .await
                .db()?;
        }
        Ok(())
    }
}
