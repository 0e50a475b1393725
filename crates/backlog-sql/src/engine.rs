//! The [`Backend`](backlog_core::Backend) of every dialect, written once. A dialect implements
//! [`Dialect`]: what differs between engines (migrations and their lock, batch inserts, the
//! claim and completion strategies, notifications, vacuum, transactions, and the statements that
//! need `RETURNING`, which MySQL lacks). [`sql_backend!`] writes the `Backend` impl of a dialect:
//! every other method over the dialect's catalog, and a forward to [`Dialect`] for the rest.
//!
//! Macros, not generic functions: each driver has its own row, connection and argument types,
//! and sqlx code generic over the database needs a bound per type it decodes and per executor
//! it runs on. Expanded in the dialect's module, the same text compiles against concrete types.

use std::future::Future;

use backlog_core::{
    AuditEntry, BackendTx, Capabilities, ClaimedJob, CompleteClaimed, CronFireParams,
    EnqueueOutcome, GroupPromoteParams, JobClaimParams, JobCompleteClaimParams, JobCompleteParams,
    JobCountPendingParams, JobFailParams, JobHeartbeatParams, JobInsertParams, JobPruneParams,
    JobRef, JobRescueParams, JobVacuumParams, LeaderParams, MigrateReport, OldestTransaction,
    QueueRedriveParams, Rescued, Result, Retention, TxClaim, TxFinish, WakeFn,
};

use std::sync::Arc;

use crate::cursor::Cursors;
use crate::dberror::DbResultExt;

/// What a dialect provides. Each method is the `Backend` method of the same name (see its
/// documentation there); the defaults are those of an engine without the feature.
pub(crate) trait Dialect: Send + Sync + 'static {
    /// Whether a statement sent on the pool needs a transaction of its own: the connections go
    /// through a transaction pooler (see `pooler`).
    fn tx_per_statement(&self) -> bool {
        false
    }

    fn capabilities(&self) -> Capabilities;

    /// A statement bounding how long a stats flush waits for another process's lock on a
    /// counts row, in its transaction (see `session_stat_lock_timeout.sql`).
    fn stat_lock_timeout(&self) -> Option<&'static str> {
        None
    }

    fn begin(&self) -> impl Future<Output = Result<Box<dyn BackendTx>>> + Send;

    fn migrate(&self) -> impl Future<Output = Result<MigrateReport>> + Send;

    fn job_insert(
        &self,
        params: JobInsertParams,
    ) -> impl Future<Output = Result<Vec<EnqueueOutcome>>> + Send;

    fn job_claim(
        &self,
        params: &JobClaimParams,
    ) -> impl Future<Output = Result<Vec<ClaimedJob>>> + Send;

    fn job_claim_tx(
        &self,
        params: &JobClaimParams,
    ) -> impl Future<Output = Result<Option<Box<dyn TxClaim>>>> + Send;

    fn job_complete(
        &self,
        params: JobCompleteParams,
    ) -> impl Future<Output = Result<Vec<JobRef>>> + Send;

    fn job_complete_claim(
        &self,
        params: JobCompleteClaimParams,
    ) -> impl Future<Output = Result<CompleteClaimed>> + Send;

    fn job_heartbeat(
        &self,
        params: JobHeartbeatParams,
    ) -> impl Future<Output = Result<bool>> + Send;

    fn job_prune(&self, params: JobPruneParams) -> impl Future<Output = Result<u64>> + Send;

    fn job_vacuum(
        &self,
        params: JobVacuumParams,
    ) -> impl Future<Output = Result<Option<backlog_core::JobVacuumed>>> + Send {
        let _ = params;
        async { Ok(None) }
    }

    /// Before an operator's action on job `id`, which applies to the states `from`: brings the
    /// job where the action's statement changes it (MySQL moves a kept completed job back from
    /// its ring of tables into the job table).
    fn admin_prepare(
        &self,
        id: i64,
        from: [&'static str; 3],
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (id, from);
        async { Ok(()) }
    }

    fn job_done_turn(
        &self,
        params: backlog_core::JobDoneTurnParams,
    ) -> impl Future<Output = Result<u64>> + Send {
        let _ = params;
        async { Ok(0) }
    }

    /// Folds the counts the database keeps (`Backend::count_fold`).
    fn count_fold(&self, now: i64) -> impl Future<Output = Result<u64>> + Send;

    /// The counts taken by a scan of the jobs (`Backend::queue_stats_scan`).
    fn queue_stats_scan(
        &self,
        queue: Option<&backlog_core::QueueName>,
        now: i64,
    ) -> impl Future<Output = Result<Vec<(String, backlog_core::QueueStats)>>> + Send;

    fn job_count_pending(
        &self,
        params: &JobCountPendingParams,
    ) -> impl Future<Output = Result<i64>> + Send;

    fn db_oldest_transaction(
        &self,
    ) -> impl Future<Output = Result<Option<OldestTransaction>>> + Send {
        async { Ok(None) }
    }

    fn cron_fire(
        &self,
        params: CronFireParams,
    ) -> impl Future<Output = Result<Option<EnqueueOutcome>>> + Send;

    fn listen(&self, wake: WakeFn) -> impl Future<Output = Result<bool>> + Send {
        let _ = wake;
        async { Ok(false) }
    }

    /// See [`returning_methods!`].
    fn leader_elect(
        &self,
        params: &LeaderParams,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;

    /// See [`returning_methods!`].
    fn job_rescue(
        &self,
        params: JobRescueParams,
    ) -> impl Future<Output = Result<Vec<Rescued>>> + Send;

    /// See [`returning_methods!`].
    fn queue_redrive(&self, params: QueueRedriveParams)
    -> impl Future<Output = Result<u64>> + Send;

    /// See [`returning_methods!`].
    fn audit_add(&self, entry: &AuditEntry) -> impl Future<Output = Result<i64>> + Send;

    fn group_promote(&self, params: GroupPromoteParams)
    -> impl Future<Output = Result<u64>> + Send;

    /// Moves available jobs left on a shard at or above their queue's `shards` below it, where
    /// claims look (`job_reshard.sql`); the number moved. Nothing where claims keep one head.
    fn job_reshard(&self) -> impl Future<Output = Result<u64>> + Send {
        async { Ok(0) }
    }

    /// Whether the database releases the children of jobs that end (schema version 20: the
    /// triggers of PostgreSQL and SQLite); else ending a job with dependents takes a transaction
    /// whose [`Releases::jobs_ended`] does it (MySQL).
    fn releases_children(&self) -> bool {
        true
    }

    /// A queue's settings were stored through this backend: forget what was cached of them.
    fn settings_changed(&self) {}

    /// Where this backend's FIFO claims start (`cursor`), on a dialect that keeps cursors.
    fn cursors(&self) -> Option<&Arc<Cursors>> {
        None
    }

    /// Jobs may now lie behind the cursors: the next claims are full passes.
    fn rewind(&self) {
        if let Some(c) = self.cursors() {
            c.rewind();
        }
    }
}

/// The [`Dialect`] methods `leader_elect`, `job_rescue`, `queue_redrive` and `audit_add` of an
/// engine with `UPDATE … RETURNING` and `INSERT … RETURNING` (PostgreSQL, SQLite): one statement
/// each. MySQL writes its own (lock, update, read back). Expanded inside `impl Dialect for …`,
/// with the dialect's catalog module as `$cat`.
macro_rules! returning_methods {
    ($cat:ident) => {
        async fn leader_elect(
            &self,
            p: &backlog_core::LeaderParams,
        ) -> backlog_core::Result<Option<i64>> {
            $crate::pooler::on_pool!(
                self,
                $cat::leader_elect(&p.name, &p.holder, p.now, p.expires_at).scalar(),
                fetch_optional
            )
            .db()
        }

        async fn job_rescue(
            &self,
            p: backlog_core::JobRescueParams,
        ) -> backlog_core::Result<Vec<backlog_core::Rescued>> {
            let cursors = $crate::engine::Dialect::cursors(self);
            let plan = cursors.map(|c| c.floor_plan($crate::cursor::Floor::Rescue));
            let after = plan.as_ref().map_or(i64::MIN, |plan| plan.after);
            let rows: Vec<(String, bool)> = $crate::pooler::on_pool!(
                self,
                $cat::job_rescue(p.now, p.limit as i64, after).as_(),
                fetch_all
            )
            .db()?;
            if let (Some(c), Some(plan)) = (cursors, &plan) {
                // Below its limit, the pass found every lease expired before `now`.
                c.floor_record(plan, (rows.len() < p.limit as usize).then_some(p.now));
            }
            Ok(rows
                .into_iter()
                .map(|(queue, dead)| backlog_core::Rescued { queue, dead })
                .collect())
        }

        async fn queue_redrive(
            &self,
            p: backlog_core::QueueRedriveParams,
        ) -> backlog_core::Result<u64> {
            let res = $crate::pooler::on_pool!(
                self,
                $cat::queue_redrive(p.now, p.queue.as_str(), p.limit as i64).query(),
                execute
            );
            match res.db() {
                Ok(r) => Ok(r.rows_affected()),
                // Another job holds one of the unique keys: move the others one at a time.
                Err(e) if $crate::shared::is_unique_violation(&e) => {
                    let ids: Vec<i64> = $crate::pooler::on_pool!(
                        self,
                        $cat::queue_dead_ids(p.queue.as_str(), p.limit as i64).scalar(),
                        fetch_all
                    )
                    .db()?;
                    $crate::shared::redrive_one_by_one(self, &ids, p.now).await
                }
                Err(e) => Err(e),
            }
        }

        async fn audit_add(&self, e: &backlog_core::AuditEntry) -> backlog_core::Result<i64> {
            let (actor, action, queue) = (e.actor.as_str(), e.action.as_str(), e.queue.as_deref());
            $crate::pooler::on_pool!(
                self,
                $cat::audit_add(e.at, actor, action, queue, e.job_id, e.detail.as_str()).scalar(),
                fetch_one
            )
            .db()
        }
    };
}

pub(crate) use returning_methods;

/// The limits of a claim under a queue's global concurrency or rate limit, and the room they
/// leave it, read in the claim's transaction on `$conn` (`&mut` a connection): the queue row
/// locked (`queue_lock`), its running jobs counted (`queue_running`, a later statement, which
/// sees what the lock's last holder committed) when it has a global limit. Expands to
/// `(Limits, i64)`.
macro_rules! limited_room {
    ($cat:ident, $conn:expr, $p:expr) => {{
        let queue = $p.queue.as_str();
        let lock: Option<$crate::shared::LockedLimits> = $cat::queue_lock(queue)
            .as_()
            .fetch_optional(&mut *$conn)
            .await
            .db()?;
        let limits = $crate::shared::Limits::at(lock, $p.now);
        let running: i64 = match limits.counts_running() {
            true => $cat::queue_running(queue)
                .scalar()
                .fetch_one(&mut *$conn)
                .await
                .db()?,
            false => 0,
        };
        (limits, limits.room($p.limit, running))
    }};
}

/// Stores a rate-limited queue's token bucket after a claim under its limits took `$taken` jobs
/// (`queue_rate_take`, in the claim's transaction on `$conn`); nothing without a rate limit.
macro_rules! store_bucket {
    ($cat:ident, $conn:expr, $p:expr, $limits:expr, $taken:expr) => {
        if let Some(tokens) = $limits.bucket_after($taken) {
            $cat::queue_rate_take(tokens, $p.now, $p.queue.as_str())
                .query()
                .execute(&mut *$conn)
                .await
                .db()?;
        }
    };
}

/// Records the starts of a claim under a queue's limits in the ordered groups of the jobs it
/// took (`$groups`: their group keys, any order, repeats allowed), where the queue has a group
/// rate limit (`group_rate_started`, in the claim's transaction on `$conn`). `$list` turns the
/// sorted keys (`Vec<String>`, named `$g`) into the statement's argument.
macro_rules! store_group_starts {
    ($cat:ident, $conn:expr, $p:expr, $limits:expr, $groups:expr, |$g:ident| $list:expr) => {
        if let Some(by) = $limits.group_started_by($p.now) {
            let mut groups: Vec<String> = $groups;
            groups.sort_unstable();
            groups.dedup();
            if !groups.is_empty() {
                let $g = groups;
                $cat::group_rate_started($p.queue.as_str(), $list, by)
                    .query()
                    .execute(&mut *$conn)
                    .await
                    .db()?;
            }
        }
    };
}

pub(crate) use {limited_room, store_bucket, store_group_starts};

/// Most jobs of a queue one sweep moves off shards its queue no longer has (`job_reshard.sql`).
pub(crate) const RESHARD_JOBS: i64 = 10_000;

/// Most groups one sweep promotes in (the next sweep takes the rest).
pub(crate) const SWEEP_GROUPS: i64 = 1000;

/// The `Backend` impl of `$backend`, a [`Dialect`] with a `pool` field, over its catalog module
/// `$cat`. Expanded in the dialect's module, where `$cat`, `DbResultExt` and the row macros are
/// in scope. One macro writes the whole impl because `#[async_trait]` rewrites only the methods
/// it sees, not those a macro inside the impl would add.
macro_rules! sql_backend {
    ($backend:ty, $cat:ident) => {
        #[async_trait::async_trait]
        impl backlog_core::Backend for $backend {
            fn capabilities(&self) -> backlog_core::Capabilities {
                $crate::engine::Dialect::capabilities(self)
            }

            async fn begin(&self) -> backlog_core::Result<Box<dyn backlog_core::BackendTx>> {
                $crate::engine::Dialect::begin(self).await
            }

            async fn migrate(&self) -> backlog_core::Result<backlog_core::MigrateReport> {
                $crate::engine::Dialect::migrate(self).await
            }

            async fn job_insert(
                &self,
                p: backlog_core::JobInsertParams,
            ) -> backlog_core::Result<Vec<backlog_core::EnqueueOutcome>> {
                let Some(cursors) = $crate::engine::Dialect::cursors(self).cloned() else {
                    return $crate::engine::Dialect::job_insert(self, p).await;
                };
                // Each queue's first job in claim order (a batch is mostly of one queue).
                let mut first: Vec<(String, i16, i64)> = vec![];
                for j in &p.jobs {
                    let key = (j.priority, j.run_at.unwrap_or(p.now));
                    match first.iter_mut().find(|(q, ..)| q == j.queue.as_str()) {
                        Some(f) => (f.1, f.2) = key.min((f.1, f.2)),
                        None => first.push((j.queue.as_str().to_owned(), key.0, key.1)),
                    }
                }
                let out = $crate::engine::Dialect::job_insert(self, p).await?;
                cursors.enqueued(first.iter().map(|(q, p, r)| (q.as_str(), *p, *r)));
                Ok(out)
            }

            async fn job_claim(
                &self,
                p: &backlog_core::JobClaimParams,
            ) -> backlog_core::Result<Vec<backlog_core::ClaimedJob>> {
                $crate::engine::Dialect::job_claim(self, p).await
            }

            async fn job_claim_tx(
                &self,
                p: &backlog_core::JobClaimParams,
            ) -> backlog_core::Result<Option<Box<dyn backlog_core::TxClaim>>> {
                $crate::engine::Dialect::job_claim_tx(self, p).await
            }

            async fn job_complete(
                &self,
                p: backlog_core::JobCompleteParams,
            ) -> backlog_core::Result<Vec<backlog_core::JobRef>> {
                $crate::engine::Dialect::job_complete(self, p).await
            }

            async fn job_complete_claim(
                &self,
                p: backlog_core::JobCompleteClaimParams,
            ) -> backlog_core::Result<backlog_core::CompleteClaimed> {
                $crate::engine::Dialect::job_complete_claim(self, p).await
            }

            async fn job_fail(&self, p: backlog_core::JobFailParams) -> backlog_core::Result<()> {
                // A retry due at once sorts where the job was: behind the cursor.
                if p.retry_at.is_some_and(|at| at <= p.now) {
                    $crate::engine::Dialect::rewind(self);
                }
                // A failure that ends the job: its children go in the same transaction, where the
                // database does not release them itself.
                let ends = p.retry_at.is_none()
                    && !$crate::engine::Dialect::releases_children(self);
                if $crate::engine::Dialect::tx_per_statement(self) || ends {
                    let mut tx = self.tx().await.db()?;
                    $crate::engine::ConnOps::fail(&mut *tx, &p).await?;
                    if ends {
                        let how = if p.cancelled { "cancelled" } else { "dead" };
                        $crate::engine::Releases::jobs_ended(&mut *tx, &[p.job.id], how, p.now)
                            .await?;
                    }
                    return tx.commit().await.db();
                }
                let mut conn = self.pool.acquire().await.db()?;
                $crate::engine::ConnOps::fail(&mut *conn, &p).await
            }

            async fn job_release(
                &self,
                p: backlog_core::JobReleaseParams,
            ) -> backlog_core::Result<()> {
                let res = $crate::pooler::on_pool!(
                    self,
                    $cat::job_release(p.run_at, p.job.id, p.job.token).query(),
                    execute
                )
                .db()?;
                $crate::engine::Dialect::rewind(self);
                $crate::shared::fenced(res.rows_affected(), p.job.id)
            }

            async fn job_heartbeat(
                &self,
                p: backlog_core::JobHeartbeatParams,
            ) -> backlog_core::Result<bool> {
                $crate::engine::Dialect::job_heartbeat(self, p).await
            }

            async fn job_progress(
                &self,
                p: backlog_core::JobProgressParams,
            ) -> backlog_core::Result<()> {
                let res = $crate::pooler::on_pool!(
                    self,
                    $cat::job_progress(p.progress, p.result, p.job.id, p.job.token).query(),
                    execute
                )
                .db()?;
                $crate::shared::fenced(res.rows_affected(), p.job.id)
            }

            async fn job_cancel_request(
                &self,
                id: i64,
                now: i64,
            ) -> backlog_core::Result<backlog_core::Job> {
                let res = $crate::pooler::on_pool!(
                    self,
                    $cat::job_cancel_request(now, id).query(),
                    execute
                )
                .db()?;
                let job = backlog_core::Backend::job_get(self, id).await?;
                let cancel = backlog_core::AdminAction::Cancel;
                cancel.outcome(id, res.rows_affected() > 0, job)
            }

            async fn job_prune(&self, p: backlog_core::JobPruneParams) -> backlog_core::Result<u64> {
                $crate::engine::Dialect::job_prune(self, p).await
            }

            async fn job_vacuum(
                &self,
                p: backlog_core::JobVacuumParams,
            ) -> backlog_core::Result<Option<backlog_core::JobVacuumed>> {
                $crate::engine::Dialect::job_vacuum(self, p).await
            }

            async fn job_done_turn(
                &self,
                p: backlog_core::JobDoneTurnParams,
            ) -> backlog_core::Result<u64> {
                $crate::engine::Dialect::job_done_turn(self, p).await
            }

            async fn schema_version(&self) -> backlog_core::Result<i64> {
                let version = $crate::pooler::on_pool!(
                    self,
                    $cat::schema_version().scalar(),
                    fetch_one
                )
                .db();
                match version {
                    Err(backlog_core::Error::SchemaOutdated { .. }) => Ok(0),
                    other => other,
                }
            }

            async fn queue_oldest_due(&self, now: i64) -> backlog_core::Result<Vec<(String, i64)>> {
                $crate::pooler::on_pool!(self, $cat::queue_oldest_due(now).as_(), fetch_all)
                    .db()
            }

            async fn db_now(&self) -> backlog_core::Result<Option<i64>> {
                $crate::pooler::on_pool!(self, $cat::db_now().scalar(), fetch_one)
                    .db()
                    .map(Some)
            }

            async fn db_oldest_transaction(
                &self,
            ) -> backlog_core::Result<Option<backlog_core::OldestTransaction>> {
                $crate::engine::Dialect::db_oldest_transaction(self).await
            }

            async fn leader_elect(
                &self,
                p: &backlog_core::LeaderParams,
            ) -> backlog_core::Result<Option<i64>> {
                $crate::engine::Dialect::leader_elect(self, p).await
            }

            async fn leader_resign(&self, name: &str, holder: &str) -> backlog_core::Result<()> {
                $crate::pooler::on_pool!(
                    self,
                    $cat::leader_resign(name, holder).query(),
                    execute
                )
                .db()?;
                Ok(())
            }

            async fn cron_fire(
                &self,
                p: backlog_core::CronFireParams,
            ) -> backlog_core::Result<Option<backlog_core::EnqueueOutcome>> {
                $crate::engine::Dialect::cron_fire(self, p).await
            }

            async fn topic_subscribe(
                &self,
                topic: &backlog_core::QueueName,
                queue: &backlog_core::QueueName,
                subscribe: bool,
                now: i64,
            ) -> backlog_core::Result<()> {
                let stmt = if subscribe {
                    $cat::topic_subscribe(topic.as_str(), queue.as_str(), now)
                } else {
                    $cat::topic_unsubscribe(topic.as_str(), queue.as_str())
                };
                $crate::pooler::on_pool!(self, stmt.query(), execute).db()?;
                Ok(())
            }

            async fn topic_subscribers(
                &self,
                topic: &backlog_core::QueueName,
            ) -> backlog_core::Result<Vec<backlog_core::QueueName>> {
                let names: Vec<String> = $crate::pooler::on_pool!(
                    self,
                    $cat::topic_subscribers(topic.as_str()).scalar(),
                    fetch_all
                )
                .db()?;
                names.into_iter().map(backlog_core::QueueName::new).collect()
            }

            async fn listen(&self, wake: backlog_core::WakeFn) -> backlog_core::Result<bool> {
                $crate::engine::Dialect::listen(self, wake).await
            }

            async fn job_rescue(
                &self,
                p: backlog_core::JobRescueParams,
            ) -> backlog_core::Result<Vec<backlog_core::Rescued>> {
                let rescued = $crate::engine::Dialect::job_rescue(self, p).await?;
                if !rescued.is_empty() {
                    $crate::engine::Dialect::rewind(self);
                }
                Ok(rescued)
            }

            async fn group_promote(
                &self,
                p: backlog_core::GroupPromoteParams,
            ) -> backlog_core::Result<u64> {
                if p.groups.is_empty() {
                    return Ok(0);
                }
                let promoted = $crate::shared::retry_transient(|| {
                    $crate::engine::Dialect::group_promote(self, p.clone())
                })
                .await?;
                // A group's next job was enqueued long ago: behind the cursor.
                if promoted > 0 {
                    $crate::engine::Dialect::rewind(self);
                }
                Ok(promoted)
            }

            async fn group_sweep(&self, now: i64) -> backlog_core::Result<u64> {
                let reshard = $crate::engine::Dialect::cursors(self).is_none_or(|c| c.reshard_due());
                if reshard && $crate::engine::Dialect::job_reshard(self).await? > 0 {
                    $crate::engine::Dialect::rewind(self);
                }
                let rows: Vec<(String, String)> = $crate::pooler::on_pool!(
                    self,
                    $cat::group_stalled(now, $crate::engine::SWEEP_GROUPS).as_(),
                    fetch_all
                )
                .db()?;
                let mut by_queue: std::collections::BTreeMap<String, Vec<String>> =
                    Default::default();
                for (queue, group) in rows {
                    by_queue.entry(queue).or_default().push(group);
                }
                let mut promoted = 0;
                for (queue, groups) in by_queue {
                    promoted += backlog_core::Backend::group_promote(
                        self,
                        backlog_core::GroupPromoteParams {
                            queue: backlog_core::QueueName::new(queue)?,
                            groups,
                            now,
                        },
                    )
                    .await?;
                }
                Ok(promoted)
            }

            async fn queue_flow(
                &self,
                queue: &backlog_core::QueueName,
                now: i64,
            ) -> backlog_core::Result<backlog_core::QueueFlow> {
                let (running, waiting, waiting_groups): (i64, i64, i64) =
                    $crate::pooler::on_pool!(
                        self,
                        $cat::queue_flow(queue.as_str()).as_(),
                        fetch_one
                    )
                    .db()?;
                let blocked: Vec<(String, i64, i64, i32, i64)> =
                    $crate::pooler::on_pool!(
                        self,
                        $cat::group_blocked(queue.as_str(), now, 20).as_(),
                        fetch_all
                    )
                    .db()?;
                Ok(backlog_core::QueueFlow {
                    running,
                    waiting,
                    waiting_groups,
                    blocked: blocked
                        .into_iter()
                        .map(|(group, job_id, retry_at, attempts, waiting)| {
                            backlog_core::BlockedGroup {
                                group,
                                job_id,
                                retry_at,
                                reason: backlog_core::BlockReason::of_attempts(attempts),
                                waiting,
                            }
                        })
                        .collect(),
                })
            }

            async fn job_get(&self, id: i64) -> backlog_core::Result<Option<backlog_core::Job>> {
                let row = $crate::pooler::on_pool!(
                    self,
                    $cat::job_get(id).query(),
                    fetch_optional
                )
                .db()?;
                if let Some(r) = row {
                    return Ok(Some(job_from_row!(&r)));
                }
                let row = $crate::pooler::on_pool!(
                    self,
                    $cat::job_get_archived(id).query(),
                    fetch_optional
                )
                .db()?;
                row.map(|r| {
                    Ok(backlog_core::Job {
                        archived: true,
                        ..job_from_row!(&r)
                    })
                })
                .transpose()
            }

            async fn job_list(
                &self,
                p: backlog_core::JobListParams,
            ) -> backlog_core::Result<Vec<backlog_core::Job>> {
                let (state, mode) = $crate::shared::state_filter(p.state);
                let queue = p.queue.as_ref().map(|q| q.as_str());
                let kind = p.kind.as_ref().map(|k| k.as_str());
                let key = p.unique_key.as_deref();
                let (after, now, limit) = (p.after_id, p.now, p.limit as i64);
                let rows = $crate::pooler::on_pool!(
                    self,
                    $cat::job_list(queue, state, after, mode, now, limit, kind, key).query(),
                    fetch_all
                )
                .db()?;
                rows.iter().map(|r| Ok(job_from_row!(r))).collect()
            }

            async fn job_admin(
                &self,
                id: i64,
                action: backlog_core::AdminAction,
                now: i64,
            ) -> backlog_core::Result<backlog_core::Job> {
                let t = $crate::shared::admin_target(action, now);
                $crate::engine::Dialect::admin_prepare(self, id, t.from).await?;
                #[rustfmt::skip]
                let stmt = $cat::job_admin(
                    t.to, t.run_at, t.reset_attempts, t.finished_at, id, t.from[0], t.from[1],
                    t.from[2],
                );
                let ends = action == backlog_core::AdminAction::Cancel
                    && !$crate::engine::Dialect::releases_children(self);
                let changed = if ends {
                    // A cancel ends the job: its children go in the same transaction.
                    let mut tx = self.tx().await.db()?;
                    let res = stmt.query().execute(&mut *tx).await.db()?;
                    if res.rows_affected() > 0 {
                        $crate::engine::Releases::jobs_ended(&mut *tx, &[id], "cancelled", now)
                            .await?;
                    }
                    tx.commit().await.db()?;
                    res.rows_affected()
                } else {
                    $crate::pooler::on_pool!(self, stmt.query(), execute).db()?.rows_affected()
                };
                if changed > 0 {
                    $crate::engine::Dialect::rewind(self);
                }
                let job = backlog_core::Backend::job_get(self, id).await?;
                action.outcome(id, changed > 0, job)
            }

            async fn job_delete(
                &self,
                id: i64,
                now: i64,
            ) -> backlog_core::Result<backlog_core::Job> {
                use backlog_core::{Error, JobState};
                let job = self.job_get(id).await?.ok_or(Error::JobNotFound { job_id: id })?;
                if job.state == JobState::Running && !job.archived {
                    return Err(job.conflict("delete"));
                }
                if job.state == JobState::Completed && !job.archived {
                    // MySQL keeps completed jobs in a ring of tables: back into the job table.
                    let kept = ["completed"; 3];
                    $crate::engine::Dialect::admin_prepare(self, id, kept).await?;
                }
                let stmt = if job.archived {
                    $cat::job_delete_archived(id)
                } else {
                    $cat::job_delete(id)
                };
                let ends = !job.state.is_finished()
                    && !$crate::engine::Dialect::releases_children(self);
                let res = if ends {
                    // A job deleted before it ran ends as `deleted` for its children, which go
                    // in the same transaction.
                    let mut tx = self.tx().await.db()?;
                    let res = stmt.query().execute(&mut *tx).await.db()?;
                    if res.rows_affected() > 0 {
                        $crate::engine::Releases::jobs_ended(&mut *tx, &[id], "deleted", now)
                            .await?;
                    }
                    tx.commit().await.db()?;
                    res
                } else {
                    $crate::pooler::on_pool!(self, stmt.query(), execute).db()?
                };
                if res.rows_affected() > 0 {
                    return Ok(job);
                }
                // It changed meanwhile: started running, moved to the archive, or gone.
                match self.job_get(id).await? {
                    Some(j) if j.archived != job.archived => self.job_delete(id, now).await,
                    Some(j) => Err(j.conflict("delete")),
                    None => Err(Error::JobNotFound { job_id: id }),
                }
            }

            async fn job_count_pending(
                &self,
                p: &backlog_core::JobCountPendingParams,
            ) -> backlog_core::Result<i64> {
                $crate::engine::Dialect::job_count_pending(self, p).await
            }

            async fn queue_redrive(
                &self,
                p: backlog_core::QueueRedriveParams,
            ) -> backlog_core::Result<u64> {
                let moved = $crate::engine::Dialect::queue_redrive(self, p).await?;
                if moved > 0 {
                    $crate::engine::Dialect::rewind(self);
                }
                Ok(moved)
            }

            async fn queue_get(
                &self,
                name: &backlog_core::QueueName,
            ) -> backlog_core::Result<Option<backlog_core::QueueSettings>> {
                let row = $crate::pooler::on_pool!(
                    self,
                    $cat::queue_get(name.as_str()).query(),
                    fetch_optional
                )
                .db()?;
                row.map(|r| Ok(queue_from_row!(&r))).transpose()
            }

            async fn queue_ensure(
                &self,
                name: &backlog_core::QueueName,
                now: i64,
            ) -> backlog_core::Result<()> {
                $crate::pooler::on_pool!(
                    self,
                    $cat::queue_ensure(name.as_str(), now).query(),
                    execute
                )
                .db()?;
                Ok(())
            }

            async fn queue_upsert(
                &self,
                s: &backlog_core::QueueSettings,
                now: i64,
            ) -> backlog_core::Result<()> {
                // Claims under a limit write the queue row: on a Galera cluster a change of
                // settings beside them can lose certification, and is simply tried again.
                $crate::shared::retry_transient(|| async {
                    let stmt = $cat::queue_upsert(
                        s.name.as_str(),
                        s.paused,
                        s.max_attempts,
                        s.backoff_base.as_millis() as i64,
                        s.backoff_max.as_millis() as i64,
                        s.lease.as_millis() as i64,
                        s.order.as_str(),
                        s.retention.as_str(),
                        s.concurrency.map(|c| c as i32),
                        s.global_concurrency.map(|c| c as i32),
                        s.group_concurrency as i32,
                        s.group_on_failure.as_str(),
                        s.rate_limit.map(|r| r.starts as i32),
                        s.rate_limit
                            .map_or(1000, |r| (r.period.as_millis() as i64).max(1)),
                        s.group_rate_limit.map(|r| r.starts as i32),
                        s.group_rate_limit
                            .map_or(1000, |r| (r.period.as_millis() as i64).max(1)),
                        i32::from(s.shards),
                        now,
                    );
                    $crate::pooler::on_pool!(self, stmt.query(), execute).db()
                })
                .await?;
                $crate::engine::Dialect::settings_changed(self);
                // Jobs on shards a lowered count no longer has: where claims look, at once.
                $crate::engine::Dialect::job_reshard(self).await?;
                $crate::engine::Dialect::rewind(self);
                Ok(())
            }

            async fn queue_set_paused(
                &self,
                name: &backlog_core::QueueName,
                paused: bool,
                now: i64,
            ) -> backlog_core::Result<()> {
                $crate::shared::retry_transient(|| async {
                    $crate::pooler::on_pool!(
                        self,
                        $cat::queue_set_paused(name.as_str(), paused, now).query(),
                        execute
                    )
                    .db()
                })
                .await?;
                // Claims while it was paused found nothing, full passes too: look again.
                if !paused {
                    $crate::engine::Dialect::rewind(self);
                }
                Ok(())
            }

            async fn queue_list(&self) -> backlog_core::Result<Vec<backlog_core::QueueInfo>> {
                let rows = $crate::pooler::on_pool!(
                    self,
                    $cat::queue_all().query(),
                    fetch_all
                )
                .db()?;
                let settings = rows
                    .iter()
                    .map(|r| Ok(queue_from_row!(r)))
                    .collect::<backlog_core::Result<Vec<_>>>()?;
                let pending: Vec<(String, i64)> = $crate::pooler::on_pool!(
                    self,
                    $cat::queue_pending().as_(),
                    fetch_all
                )
                .db()?;
                $crate::shared::merge_queue_list(settings, pending)
            }

            async fn queue_stats(
                &self,
                queue: Option<&backlog_core::QueueName>,
                now: i64,
            ) -> backlog_core::Result<Vec<(String, backlog_core::QueueStats)>> {
                let stmt = $cat::queue_stats(now, queue.map(|q| q.as_str()));
                $crate::engine::stats_from!(self, $cat, queue, stmt)
            }

            async fn queue_stats_scan(
                &self,
                queue: Option<&backlog_core::QueueName>,
                now: i64,
            ) -> backlog_core::Result<Vec<(String, backlog_core::QueueStats)>> {
                $crate::engine::Dialect::queue_stats_scan(self, queue, now).await
            }

            async fn count_fold(&self, now: i64) -> backlog_core::Result<u64> {
                $crate::engine::Dialect::count_fold(self, now).await
            }

            async fn stat_add(&self, rows: &[backlog_core::StatRow]) -> backlog_core::Result<()> {
                // In one order in every process: two flushes that each lock rows the other
                // wants next would deadlock.
                let mut rows: Vec<&backlog_core::StatRow> = rows.iter().collect();
                rows.sort_unstable_by(|a, b| (&a.queue, a.minute).cmp(&(&b.queue, b.minute)));
                let mut tx = self.tx().await.db()?;
                if let Some(bound) = $crate::engine::Dialect::stat_lock_timeout(self) {
                    sqlx::raw_sql(bound).execute(&mut *tx).await.db()?;
                }
                for r in rows {
                    let c = &r.counts;
                    let w = &c.wait;
                    #[rustfmt::skip]
                    let stmt = $cat::stat_add(
                        r.queue.as_str(), r.minute, c.enqueued, c.started, c.completed, c.failed,
                        c.dead, c.rescued, c.wait_sum_us, w[0], w[1], w[2], w[3], w[4], w[5], w[6],
                    );
                    stmt.query().execute(&mut *tx).await.db()?;
                }
                tx.commit().await.db()
            }

            async fn stat_snapshot(
                &self,
                minute: i64,
                depths: &[(String, backlog_core::StatDepth)],
            ) -> backlog_core::Result<()> {
                let mut tx = self.tx().await.db()?;
                for (queue, d) in depths {
                    $cat::stat_snapshot(queue, minute, d.available, d.scheduled, d.running, d.dead)
                        .query()
                        .execute(&mut *tx)
                        .await
                        .db()?;
                }
                tx.commit().await.db()
            }

            async fn stat_history(
                &self,
                queue: Option<&backlog_core::QueueName>,
                since: i64,
            ) -> backlog_core::Result<Vec<backlog_core::StatRow>> {
                let rows = $crate::pooler::on_pool!(
                    self,
                    $cat::stat_history(since, queue.map(|q| q.as_str())).query(),
                    fetch_all
                )
                .db()?;
                rows.iter().map(|r| Ok(stat_from_row!(r))).collect()
            }

            async fn stat_totals(&self) -> backlog_core::Result<Vec<backlog_core::StatRow>> {
                let rows = $crate::pooler::on_pool!(
                    self,
                    $cat::stat_totals().query(),
                    fetch_all
                )
                .db()?;
                rows.iter().map(|r| Ok(stat_from_row!(r))).collect()
            }

            async fn stat_prune(&self, before: i64) -> backlog_core::Result<u64> {
                let mut tx = self.tx().await.db()?;
                $cat::stat_fold(before)
                    .query()
                    .execute(&mut *tx)
                    .await
                    .db()?;
                let res = $cat::stat_prune(before)
                    .query()
                    .execute(&mut *tx)
                    .await
                    .db()?;
                tx.commit().await.db()?;
                Ok(res.rows_affected())
            }

            async fn audit_add(&self, e: &backlog_core::AuditEntry) -> backlog_core::Result<i64> {
                $crate::engine::Dialect::audit_add(self, e).await
            }

            async fn audit_list(
                &self,
                p: &backlog_core::AuditListParams,
            ) -> backlog_core::Result<Vec<backlog_core::AuditEntry>> {
                let queue = p.queue.as_ref().map(|q| q.as_str());
                let rows = $crate::pooler::on_pool!(
                    self,
                    $cat::audit_list(
                        p.before_id,
                        queue,
                        p.actor.as_deref(),
                        p.action.as_deref(),
                        p.limit as i64,
                    )
                    .query(),
                    fetch_all
                )
                .db()?;
                rows.iter().map(|r| Ok(audit_from_row!(r))).collect()
            }

            async fn cron_declare(
                &self,
                schedules: &[backlog_core::CronSchedule],
            ) -> backlog_core::Result<()> {
                let mut tx = self.tx().await.db()?;
                for c in schedules {
                    $cat::cron_declare(
                        &c.name,
                        c.schedule.as_deref().unwrap_or(""),
                        c.queue.as_deref().unwrap_or(""),
                        c.kind.as_deref(),
                        c.next_tick,
                        c.declared_at.unwrap_or(0),
                    )
                    .query()
                    .execute(&mut *tx)
                    .await
                    .db()?;
                }
                tx.commit().await.db()
            }

            async fn cron_list(&self) -> backlog_core::Result<Vec<backlog_core::CronSchedule>> {
                let rows = $crate::pooler::on_pool!(self, $cat::cron_list().query(), fetch_all)
                    .db()?;
                rows.iter()
                    .map(|r| {
                        use sqlx::Row as _;
                        Ok(backlog_core::CronSchedule {
                            name: r.try_get("name").db()?,
                            last_tick: r.try_get("last_tick").db()?,
                            schedule: r.try_get("schedule").db()?,
                            queue: r.try_get("queue").db()?,
                            kind: r.try_get("kind").db()?,
                            next_tick: r.try_get("next_tick").db()?,
                            declared_at: r.try_get("declared_at").db()?,
                        })
                    })
                    .collect()
            }

            async fn worker_beat(
                &self,
                w: &backlog_core::WorkerRegistration,
            ) -> backlog_core::Result<()> {
                $crate::pooler::on_pool!(
                    self,
                    $cat::worker_beat(
                        &w.id,
                        &w.host,
                        w.pid,
                        &w.version,
                        &w.queues,
                        w.running,
                        w.started_at,
                        w.seen_at,
                        w.expires_at,
                    )
                    .query(),
                    execute
                )
                .db()
                .map(drop)
            }

            async fn worker_gone(&self, id: &str) -> backlog_core::Result<()> {
                $crate::pooler::on_pool!(self, $cat::worker_gone(id).query(), execute)
                    .db()
                    .map(drop)
            }

            async fn worker_list(
                &self,
            ) -> backlog_core::Result<Vec<backlog_core::WorkerRegistration>> {
                let rows = $crate::pooler::on_pool!(self, $cat::worker_list().query(), fetch_all)
                    .db()?;
                rows.iter()
                    .map(|r| {
                        use sqlx::Row as _;
                        Ok(backlog_core::WorkerRegistration {
                            id: r.try_get("id").db()?,
                            host: r.try_get("host").db()?,
                            pid: r.try_get("pid").db()?,
                            version: r.try_get("version").db()?,
                            queues: r.try_get("queues").db()?,
                            running: r.try_get("running").db()?,
                            started_at: r.try_get("started_at").db()?,
                            seen_at: r.try_get("seen_at").db()?,
                            expires_at: r.try_get("expires_at").db()?,
                        })
                    })
                    .collect()
            }

            async fn worker_prune(&self, before: i64) -> backlog_core::Result<u64> {
                $crate::pooler::on_pool!(self, $cat::worker_prune(before).query(), execute)
                    .db()
                    .map(|r| r.rows_affected())
            }

            async fn close(&self) {
                self.pool.close().await;
            }
        }
    };
}

pub(crate) use sql_backend;

/// A transaction the caller controls on one of the built-in backends: the sqlx transaction, with
/// the enqueue and completion of its connection ([`JobConnection`](crate::JobConnection)).
pub struct SqlTx<DB: sqlx::Database>(pub(crate) sqlx::Transaction<'static, DB>);

impl<DB: sqlx::Database> SqlTx<DB> {
    /// The transaction's connection, for the caller's own statements.
    pub fn conn(&mut self) -> &mut DB::Connection {
        &mut self.0
    }
}

#[async_trait::async_trait]
impl<DB: sqlx::Database> BackendTx for SqlTx<DB>
where
    DB::Connection: crate::JobConnection,
{
    async fn enqueue(
        &mut self,
        jobs: Vec<backlog_core::NewJob>,
        now: i64,
    ) -> Result<Vec<EnqueueOutcome>> {
        crate::JobConnection::backlog_enqueue(&mut *self.0, jobs, now).await
    }

    async fn complete(&mut self, params: &JobCompleteParams) -> Result<Vec<JobRef>> {
        crate::JobConnection::backlog_complete(&mut *self.0, params).await
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        self.0.commit().await.db()
    }

    async fn rollback(self: Box<Self>) -> Result<()> {
        self.0.rollback().await.db()
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// What a connection of each dialect does inside a transaction, for the caller's transactions
/// and transaction claim mode alike (enqueue and complete are [`JobConnection`](crate::JobConnection)'s).
pub(crate) trait ConnOps: Send {
    /// Records a failure (retry, dead or cancelled), fenced by the lease token: `LeaseLost` if
    /// the token is stale.
    fn fail(&mut self, p: &JobFailParams) -> impl Future<Output = Result<()>> + Send;

    /// Creates the queue rows of the jobs' queues that do not exist yet.
    fn ensure_queues(
        &mut self,
        jobs: &[backlog_core::NewJob],
        now: i64,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The id of the unfinished job holding `job`'s unique key, if any (an insert that met a
    /// duplicate reads it back with this).
    fn find_unique(
        &mut self,
        job: &backlog_core::NewJob,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;
}

/// What a connection does after statements of its transaction ended jobs, where the database
/// does not release their children itself ([`Dialect::releases_children`]; schema version 20):
/// MySQL's does, PostgreSQL's and SQLite's triggers do it in the ending statement, and theirs does
/// nothing.
pub(crate) trait Releases: Send {
    /// Jobs `ids` ended (`how`: `completed`, `dead`, `cancelled` or `deleted`) in this
    /// transaction: their waiting children are counted down, released or cancelled.
    fn jobs_ended(
        &mut self,
        ids: &[i64],
        how: &'static str,
        now: i64,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// [`ConnOps`] for the connection type `$conn` over the catalog module `$cat`.
macro_rules! conn_ops {
    ($conn:ty, $cat:ident) => {
        impl $crate::engine::ConnOps for $conn {
            async fn fail(&mut self, p: &backlog_core::JobFailParams) -> backlog_core::Result<()> {
                let (state, run_at, finished) = $crate::shared::fail_target(p);
                #[rustfmt::skip]
                                let stmt = $cat::job_fail(
                                    state, run_at, finished, p.now, &p.error, p.job.id, p.job.token,
                                );
                let res = stmt.query().execute(&mut *self).await.db()?;
                $crate::shared::fenced(res.rows_affected(), p.job.id)
            }

            async fn ensure_queues(
                &mut self,
                jobs: &[backlog_core::NewJob],
                now: i64,
            ) -> backlog_core::Result<()> {
                for q in backlog_core::NewJob::queues_of(jobs) {
                    $cat::queue_ensure(q.as_str(), now)
                        .query()
                        .execute(&mut *self)
                        .await
                        .db()?;
                }
                Ok(())
            }

            async fn find_unique(
                &mut self,
                job: &backlog_core::NewJob,
            ) -> backlog_core::Result<Option<i64>> {
                let Some(key) = &job.unique_key else {
                    return Ok(None);
                };
                $cat::job_find_unique(job.queue.as_str(), key.as_str())
                    .scalar()
                    .fetch_optional(&mut *self)
                    .await
                    .db()
            }
        }
    };
}

pub(crate) use conn_ops;

/// Creates the migrations table on the connection `$conn` (inside the dialect's migration lock)
/// and applies, in order, each migration of `$cat::MIGRATIONS` it does not list, recording each.
/// `whole`: a file runs as one multi-statement text; `split`: statement by statement (MySQL,
/// whose driver runs one at a time). Evaluates to the versions applied; `?` returns errors
/// from the enclosing function.
/// Per-queue counts from a statement of rows (queue, state, future: 0 due, 1 later, 2 retrying,
/// archived: 0 or 1, count), with every named queue present (`queue`, or all of them).
macro_rules! stats_from {
    ($self:ident, $cat:ident, $queue:ident, $stmt:expr) => {{
        let rows: Vec<(String, String, i64, i64, i64)> =
            $crate::pooler::on_pool!($self, $stmt.as_(), fetch_all).db()?;
        let counts = rows
            .into_iter()
            .map(|(q, state, future, archived, n)| (q, state, future, archived != 0, n))
            .collect();
        let names = match $queue {
            Some(q) => vec![q.as_str().to_owned()],
            None => {
                $crate::pooler::on_pool!($self, $cat::queue_names().scalar(), fetch_all).db()?
            }
        };
        $crate::shared::fold_stats(names, counts)
    }};
}
pub(crate) use stats_from;

macro_rules! apply_migrations {
    ($cat:ident, $conn:expr, $how:ident) => {{
        sqlx::raw_sql($cat::MIGRATION_TABLE)
            .execute(&mut *$conn)
            .await
            .db()?;
        let done: Vec<i64> = $cat::migration_versions()
            .scalar()
            .fetch_all(&mut *$conn)
            .await
            .db()?;
        let mut applied = vec![];
        for m in $cat::MIGRATIONS
            .iter()
            .filter(|m| !done.contains(&m.version))
        {
            $crate::engine::apply_migrations!(@run $how, $conn, m.sql);
            $cat::migration_record(m.version, m.name, backlog_core::now_micros())
                .query()
                .execute(&mut *$conn)
                .await
                .db()?;
            applied.push(m.version);
        }
        applied
    }};
    (@run whole, $conn:expr, $sql:expr) => {
        sqlx::raw_sql($sql).execute(&mut *$conn).await.db()?;
    };
    (@run split, $conn:expr, $sql:expr) => {
        for stmt in $crate::sqltext::split_statements($sql) {
            sqlx::raw_sql(sqlx::AssertSqlSafe(stmt))
                .execute(&mut *$conn)
                .await
                .db()?;
        }
    };
}

pub(crate) use apply_migrations;

/// Jobs claimed in transaction claim mode: the open transaction holds their row locks, and has
/// written nothing to them, until it ends (`job_claim_locked_*.sql` on PostgreSQL, the claim's
/// SELECT alone on MySQL).
pub(crate) struct SqlTxClaim<T> {
    tx: T,
    /// The jobs, until [`TxClaim::take_jobs`] hands them over.
    jobs: Vec<ClaimedJob>,
    /// Their ids, sorted: what a finish may name.
    held: Vec<i64>,
    /// The lease token and expiry of the jobs it leases.
    lease: (i64, i64),
    /// The worker that claimed them, recorded on the rows it completes or leases.
    owner: String,
    /// When they were claimed: their attempt's start.
    claimed_at: i64,
    /// The cursors the claim moved past its jobs (see [`SqlTxClaim::rewinds`]).
    cursors: Option<Arc<Cursors>>,
}

impl<T> SqlTxClaim<T> {
    /// The claim of `jobs` (not empty), which `tx` holds locked, by `owner` at `claimed_at`.
    pub fn new(tx: T, jobs: Vec<ClaimedJob>, owner: String, claimed_at: i64) -> Self {
        let mut held: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        held.sort_unstable();
        let lease = jobs
            .first()
            .map_or((0, 0), |j| (j.lease_token, j.lease_expires_at));
        SqlTxClaim {
            cursors: None,
            tx,
            jobs,
            held,
            lease,
            owner,
            claimed_at,
        }
    }
}

/// The open transaction a claim holds: the connection it runs on, ended by a commit or a
/// rollback.
pub(crate) trait HeldTx:
    std::ops::DerefMut<Target = <Self::DB as sqlx::Database>::Connection> + Send
{
    type DB: sqlx::Database;
    fn commit(self) -> impl Future<Output = Result<()>> + Send;
    fn rollback(self) -> impl Future<Output = Result<()>> + Send;
}

impl<DB: sqlx::Database> HeldTx for sqlx::Transaction<'static, DB> {
    type DB = DB;

    async fn commit(self) -> Result<()> {
        sqlx::Transaction::commit(self).await.db()
    }

    async fn rollback(self) -> Result<()> {
        sqlx::Transaction::rollback(self).await.db()
    }
}

/// What a dialect's connection does with the rows a transaction claim locked, in that transaction.
pub(crate) trait LockedOps: Send {
    /// Leases `ids` (running, the attempt counted, under `token` until `expires`).
    fn lease(
        &mut self,
        token: i64,
        owner: &str,
        expires: i64,
        now: i64,
        ids: &[i64],
    ) -> impl Future<Output = Result<()>> + Send;
    /// Completes `ids` by deleting them (`keep: false`) or marking them completed, kept: run as
    /// the attempt they were claimed for, by `owner`, from `attempted` to `now`.
    fn complete_locked(
        &mut self,
        keep: bool,
        ids: &[i64],
        owner: &str,
        attempted: i64,
        now: i64,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// [`LockedOps`] for the connection type `$conn` over the catalog module `$cat`: its
/// `job_lease_locked`, `job_complete_locked_delete` and `job_complete_locked_keep`, whose id list
/// is what `$ids` makes of a `&[i64]`. With `keep copies`, `job_complete_locked_keep` copies the
/// rows where completed jobs are kept and `job_complete_locked_delete` removes them after
/// (MySQL: no statement both deletes and inserts); else it moves them in one statement.
macro_rules! locked_ops {
    ($conn:ty, $cat:ident, $ids:expr) => {
        $crate::engine::locked_ops!($conn, $cat, $ids, keep moves);
    };
    ($conn:ty, $cat:ident, $ids:expr, keep $how:ident) => {
        impl $crate::engine::LockedOps for $conn {
            async fn lease(
                &mut self,
                token: i64,
                owner: &str,
                expires: i64,
                now: i64,
                ids: &[i64],
            ) -> backlog_core::Result<()> {
                let list = $ids(ids);
                let stmt = $cat::job_lease_locked(&*list, token, owner, expires, now);
                let res = stmt.query().execute(&mut *self).await.db()?;
                $crate::shared::locked_rows(res.rows_affected(), ids)
            }

            async fn complete_locked(
                &mut self,
                keep: bool,
                ids: &[i64],
                owner: &str,
                attempted: i64,
                now: i64,
            ) -> backlog_core::Result<()> {
                let list = $ids(ids);
                let stmt = match keep {
                    true => $cat::job_complete_locked_keep(owner, attempted, now, &*list),
                    false => $cat::job_complete_locked_delete(&*list),
                };
                let res = stmt.query().execute(&mut *self).await.db()?;
                $crate::shared::locked_rows(res.rows_affected(), ids)?;
                if keep && stringify!($how) == "copies" {
                    let res = $cat::job_complete_locked_delete(&*list)
                        .query()
                        .execute(&mut *self)
                        .await
                        .db()?;
                    $crate::shared::locked_rows(res.rows_affected(), ids)?;
                }
                Ok(())
            }
        }
    };
}

pub(crate) use locked_ops;

impl<T> SqlTxClaim<T> {
    /// Jobs the transaction leaves available (left alone, failed with a retry due at once, or
    /// all of them when it rolls back) lie behind the cursors the claim moved past them: they
    /// are rewound then.
    pub fn rewinds(mut self, cursors: Option<&Arc<Cursors>>) -> Self {
        self.cursors = cursors.cloned();
        self
    }

    /// Whether `f` leaves a held job available (left alone, or failed with a retry due at
    /// once), behind the cursors.
    fn leaves_jobs(&self, f: &TxFinish) -> bool {
        let now_due = |x: &backlog_core::TxFailure| x.retry_at.is_some_and(|at| at <= f.now);
        let resolved =
            f.completed.len() + f.leased.len() + f.failed.iter().filter(|x| !now_due(x)).count();
        resolved < self.held.len()
    }
}

impl<T: HeldTx> SqlTxClaim<T>
where
    <T::DB as sqlx::Database>::Connection: crate::JobConnection + ConnOps + LockedOps + Releases,
{
    /// The writes `f` asks for, in this transaction: completions by retention (archived ones,
    /// like failures, through a lease and the fenced statements every claimed job takes), then
    /// failures, then leases.
    async fn write(&mut self, f: &TxFinish) -> Result<()> {
        let (token, expires) = self.lease;
        let archive = f.retention == Retention::Archive;
        let mut leased: Vec<i64> = f.leased.clone();
        leased.extend(f.failed.iter().map(|x| x.id));
        if archive {
            leased.extend(&f.completed);
        }
        leased.sort_unstable();
        let conn = &mut *self.tx;
        if !leased.is_empty() {
            LockedOps::lease(conn, token, &self.owner, expires, self.claimed_at, &leased).await?;
        }
        if !f.completed.is_empty() {
            let mut ids = f.completed.clone();
            ids.sort_unstable();
            match f.retention {
                Retention::Archive => {
                    let p = JobCompleteParams {
                        jobs: (ids.iter()).map(|&id| JobRef { id, token }).collect(),
                        now: f.now,
                        retention: Retention::Archive,
                    };
                    crate::JobConnection::backlog_complete(conn, &p).await?;
                }
                r => {
                    let keep = r == Retention::Keep;
                    LockedOps::complete_locked(
                        conn,
                        keep,
                        &ids,
                        &self.owner,
                        self.claimed_at,
                        f.now,
                    )
                    .await?;
                    Releases::jobs_ended(conn, &ids, "completed", f.now).await?;
                }
            }
        }
        for x in &f.failed {
            let p = JobFailParams {
                job: JobRef { id: x.id, token },
                now: f.now,
                error: x.error.clone(),
                retry_at: x.retry_at,
                cancelled: false,
            };
            ConnOps::fail(conn, &p).await?;
            if x.retry_at.is_none() {
                Releases::jobs_ended(conn, &[x.id], "dead", f.now).await?;
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl<T: HeldTx + 'static> TxClaim for SqlTxClaim<T>
where
    <T::DB as sqlx::Database>::Connection: crate::JobConnection + ConnOps + LockedOps + Releases,
{
    fn jobs(&self) -> &[ClaimedJob] {
        &self.jobs
    }

    fn take_jobs(&mut self) -> Vec<ClaimedJob> {
        std::mem::take(&mut self.jobs)
    }

    async fn finish(mut self: Box<Self>, f: TxFinish) -> Result<()> {
        let written = match f.check_ids(&self.held) {
            Ok(()) => self.write(&f).await,
            Err(e) => Err(e),
        };
        let (leaves_jobs, cursors) = (self.leaves_jobs(&f), self.cursors.clone());
        let ended = match written {
            Ok(()) => self.tx.commit().await,
            Err(e) => {
                self.tx.rollback().await?;
                Err(e)
            }
        };
        if let Some(c) = cursors
            && (ended.is_err() || leaves_jobs)
        {
            c.rewind();
        }
        ended
    }

    async fn rollback(self: Box<Self>) -> Result<()> {
        if let Some(c) = &self.cursors {
            c.rewind();
        }
        self.tx.rollback().await
    }
}

/// The oldest open transaction from its row: session id, age in seconds, state, client.
pub(crate) fn oldest_transaction(
    row: Option<(i64, f64, String, String)>,
) -> Option<OldestTransaction> {
    row.map(|(pid, age_s, state, client)| OldestTransaction {
        pid,
        age: std::time::Duration::from_secs_f64(age_s.max(0.0)),
        state,
        client,
    })
}
