//! A deadline on every call to the database: a backend whose server or network stalls (no
//! answer, no error: a frozen server, a proxy or firewall that holds the connection open) fails
//! the call after `limit` instead of waiting forever. The call's outcome is then unknown: the
//! error is transient (`DbErrorKind::NoAnswer`), and every write backlog makes is safe to
//! repeat (fenced by lease tokens, or idempotent by unique key).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use backlog_core::{
    AdminAction, AuditEntry, AuditListParams, Backend, BackendTx, Capabilities, ClaimedJob,
    CompleteClaimed, CronFireParams, DbErrorKind, EnqueueOutcome, Error, Job, JobClaimParams,
    JobCompleteClaimParams, JobCompleteParams, JobCountPendingParams, JobDoneTurnParams,
    JobFailParams, JobHeartbeatParams, JobInsertParams, JobListParams, JobProgressParams,
    JobPruneParams, JobRef, JobReleaseParams, JobRescueParams, JobVacuumParams, JobVacuumed,
    LeaderParams, MigrateReport, NewJob, OldestTransaction, QueueInfo, QueueName,
    QueueRedriveParams, QueueSettings, QueueStats, Rescued, Result, StatDepth, StatRow, TxClaim,
    TxFinish, WakeFn,
};

/// No answer within the deadline.
#[derive(Debug)]
pub struct NoAnswer(pub Duration);

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no answer from the database within {:?} (the server or the network stalled)",
            self.0
        )
    }
}

impl std::error::Error for NoAnswer {}

fn no_answer(limit: Duration) -> Error {
    Error::Database {
        kind: DbErrorKind::NoAnswer,
        source: Box::new(NoAnswer(limit)),
    }
}

/// How each call to the backend runs: within `limit`, and with its statements unnamed when the
/// backend's connections go through a transaction pooler (see `pooler`).
#[derive(Debug, Clone, Copy)]
struct Frame {
    limit: Option<Duration>,
    unnamed: bool,
}

impl Frame {
    async fn run<T>(self, call: impl Future<Output = Result<T>>) -> Result<T> {
        let call = crate::pooler::scope(self.unnamed, call);
        match self.limit {
            Some(limit) => within(limit, call).await,
            None => call.await,
        }
    }

    /// The same without the deadline (migrations, VACUUM).
    fn unbounded(self) -> Frame {
        Frame {
            limit: None,
            ..self
        }
    }
}

async fn within<T>(limit: Duration, call: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(limit, call)
        .await
        .unwrap_or_else(|_| Err(no_answer(limit)))
}

/// A backend whose every call fails after `limit` without an answer (`BackendConfig::
/// statement_timeout`). Exempt: `migrate` (it waits for other processes' migrations) and
/// `job_vacuum` (a VACUUM of a large table may rightly take minutes). In a transaction the
/// caller controls (`begin`), each of backlog's calls has the deadline; the caller's own
/// statements on the connection do not.
///
/// It also frames each call of a PostgreSQL backend behind a transaction pooler: the statements
/// of the call are unnamed (see `BackendConfig::pg_transaction_pooler`).
#[derive(Debug)]
pub struct Deadline {
    inner: Arc<dyn Backend>,
    frame: Frame,
}

impl Deadline {
    /// `backend` with a deadline on each call (none when `limit` is `None`), and its statements
    /// unnamed when it is a PostgreSQL backend behind a transaction pooler; as it is when
    /// neither applies.
    pub fn wrap(backend: Arc<dyn Backend>, limit: Option<Duration>) -> Arc<dyn Backend> {
        let inner = Self::unwrap(&backend).clone();
        let unnamed = matches!(
            crate::SqlBackend::of(inner.as_ref()),
            Some(crate::SqlBackend::Postgres(pg)) if pg.transaction_pooler()
        );
        match (limit, unnamed) {
            (None, false) => inner,
            _ => Arc::new(Deadline {
                inner,
                frame: Frame { limit, unnamed },
            }),
        }
    }

    /// The backend under any deadline.
    pub fn unwrap(backend: &Arc<dyn Backend>) -> &Arc<dyn Backend> {
        match backend.as_any().downcast_ref::<Deadline>() {
            Some(d) => &d.inner,
            None => backend,
        }
    }

    /// The backend under the deadline.
    pub fn inner(&self) -> &dyn Backend {
        self.inner.as_ref()
    }

    /// The deadline, if there is one.
    pub fn limit(&self) -> Option<Duration> {
        self.frame.limit
    }

    async fn within<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        self.frame.run(call).await
    }
}

struct DeadlineTx {
    inner: Box<dyn BackendTx>,
    frame: Frame,
}

#[async_trait]
impl BackendTx for DeadlineTx {
    async fn enqueue(&mut self, jobs: Vec<NewJob>, now: i64) -> Result<Vec<EnqueueOutcome>> {
        self.frame.run(self.inner.enqueue(jobs, now)).await
    }
    async fn complete(&mut self, params: &JobCompleteParams) -> Result<Vec<JobRef>> {
        self.frame.run(self.inner.complete(params)).await
    }
    async fn commit(self: Box<Self>) -> Result<()> {
        self.frame.run(self.inner.commit()).await
    }
    async fn rollback(self: Box<Self>) -> Result<()> {
        self.frame.run(self.inner.rollback()).await
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self.inner.as_any_mut()
    }
}

struct DeadlineClaim {
    inner: Box<dyn TxClaim>,
    frame: Frame,
}

#[async_trait]
impl TxClaim for DeadlineClaim {
    fn jobs(&self) -> &[ClaimedJob] {
        self.inner.jobs()
    }
    fn take_jobs(&mut self) -> Vec<ClaimedJob> {
        self.inner.take_jobs()
    }
    async fn finish(self: Box<Self>, finish: TxFinish) -> Result<()> {
        self.frame.run(self.inner.finish(finish)).await
    }
    async fn rollback(self: Box<Self>) -> Result<()> {
        self.frame.run(self.inner.rollback()).await
    }
}

#[async_trait]
impl Backend for Deadline {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn begin(&self) -> Result<Box<dyn BackendTx>> {
        let inner = self.within(self.inner.begin()).await?;
        Ok(Box::new(DeadlineTx {
            inner,
            frame: self.frame,
        }))
    }
    async fn migrate(&self) -> Result<MigrateReport> {
        self.frame.unbounded().run(self.inner.migrate()).await
    }
    async fn job_insert(&self, params: JobInsertParams) -> Result<Vec<EnqueueOutcome>> {
        self.within(self.inner.job_insert(params)).await
    }
    async fn job_claim(&self, params: &JobClaimParams) -> Result<Vec<ClaimedJob>> {
        self.within(self.inner.job_claim(params)).await
    }
    async fn job_claim_tx(&self, params: &JobClaimParams) -> Result<Option<Box<dyn TxClaim>>> {
        let claim = self.within(self.inner.job_claim_tx(params)).await?;
        Ok(claim.map(|inner| {
            Box::new(DeadlineClaim {
                inner,
                frame: self.frame,
            }) as Box<dyn TxClaim>
        }))
    }
    async fn job_complete(&self, params: JobCompleteParams) -> Result<Vec<JobRef>> {
        self.within(self.inner.job_complete(params)).await
    }
    async fn job_complete_claim(&self, params: JobCompleteClaimParams) -> Result<CompleteClaimed> {
        self.within(self.inner.job_complete_claim(params)).await
    }
    async fn job_fail(&self, params: JobFailParams) -> Result<()> {
        self.within(self.inner.job_fail(params)).await
    }
    async fn job_release(&self, params: JobReleaseParams) -> Result<()> {
        self.within(self.inner.job_release(params)).await
    }
    async fn job_heartbeat(&self, params: JobHeartbeatParams) -> Result<bool> {
        self.within(self.inner.job_heartbeat(params)).await
    }
    async fn job_progress(&self, params: JobProgressParams) -> Result<()> {
        self.within(self.inner.job_progress(params)).await
    }
    async fn job_cancel_request(&self, id: i64, now: i64) -> Result<Job> {
        self.within(self.inner.job_cancel_request(id, now)).await
    }
    async fn job_prune(&self, params: JobPruneParams) -> Result<u64> {
        self.within(self.inner.job_prune(params)).await
    }
    async fn job_vacuum(&self, params: JobVacuumParams) -> Result<Option<JobVacuumed>> {
        self.frame
            .unbounded()
            .run(self.inner.job_vacuum(params))
            .await
    }
    async fn job_done_turn(&self, params: JobDoneTurnParams) -> Result<u64> {
        self.within(self.inner.job_done_turn(params)).await
    }
    async fn schema_version(&self) -> Result<i64> {
        self.within(self.inner.schema_version()).await
    }
    async fn queue_oldest_due(&self, now: i64) -> Result<Vec<(String, i64)>> {
        self.within(self.inner.queue_oldest_due(now)).await
    }
    async fn db_oldest_transaction(&self) -> Result<Option<OldestTransaction>> {
        self.within(self.inner.db_oldest_transaction()).await
    }
    async fn db_now(&self) -> Result<Option<i64>> {
        self.within(self.inner.db_now()).await
    }
    async fn leader_elect(&self, params: &LeaderParams) -> Result<Option<i64>> {
        self.within(self.inner.leader_elect(params)).await
    }
    async fn leader_resign(&self, name: &str, holder: &str) -> Result<()> {
        self.within(self.inner.leader_resign(name, holder)).await
    }
    async fn cron_declare(&self, schedules: &[backlog_core::CronSchedule]) -> Result<()> {
        self.within(self.inner.cron_declare(schedules)).await
    }
    async fn cron_list(&self) -> Result<Vec<backlog_core::CronSchedule>> {
        self.within(self.inner.cron_list()).await
    }
    async fn worker_beat(&self, worker: &backlog_core::WorkerRegistration) -> Result<()> {
        self.within(self.inner.worker_beat(worker)).await
    }
    async fn worker_gone(&self, id: &str) -> Result<()> {
        self.within(self.inner.worker_gone(id)).await
    }
    async fn worker_list(&self) -> Result<Vec<backlog_core::WorkerRegistration>> {
        self.within(self.inner.worker_list()).await
    }
    async fn worker_prune(&self, before: i64) -> Result<u64> {
        self.within(self.inner.worker_prune(before)).await
    }
    async fn cron_fire(&self, params: CronFireParams) -> Result<Option<EnqueueOutcome>> {
        self.within(self.inner.cron_fire(params)).await
    }
    async fn topic_subscribe(
        &self,
        topic: &QueueName,
        queue: &QueueName,
        subscribe: bool,
        now: i64,
    ) -> Result<()> {
        self.within(self.inner.topic_subscribe(topic, queue, subscribe, now))
            .await
    }
    async fn topic_subscribers(&self, topic: &QueueName) -> Result<Vec<QueueName>> {
        self.within(self.inner.topic_subscribers(topic)).await
    }
    async fn listen(&self, wake: WakeFn) -> Result<bool> {
        self.within(self.inner.listen(wake)).await
    }
    async fn job_rescue(&self, params: JobRescueParams) -> Result<Vec<Rescued>> {
        self.within(self.inner.job_rescue(params)).await
    }
    async fn job_get(&self, id: i64) -> Result<Option<Job>> {
        self.within(self.inner.job_get(id)).await
    }
    async fn group_promote(&self, params: backlog_core::GroupPromoteParams) -> Result<u64> {
        self.within(self.inner.group_promote(params)).await
    }
    async fn group_sweep(&self, now: i64) -> Result<u64> {
        self.within(self.inner.group_sweep(now)).await
    }
    async fn queue_flow(&self, queue: &QueueName, now: i64) -> Result<backlog_core::QueueFlow> {
        self.within(self.inner.queue_flow(queue, now)).await
    }
    async fn job_list(&self, params: JobListParams) -> Result<Vec<Job>> {
        self.within(self.inner.job_list(params)).await
    }
    async fn job_admin(&self, id: i64, action: AdminAction, now: i64) -> Result<Job> {
        self.within(self.inner.job_admin(id, action, now)).await
    }
    async fn job_delete(&self, id: i64, now: i64) -> Result<Job> {
        self.within(self.inner.job_delete(id, now)).await
    }
    async fn job_count_pending(&self, params: &JobCountPendingParams) -> Result<i64> {
        self.within(self.inner.job_count_pending(params)).await
    }
    async fn queue_redrive(&self, params: QueueRedriveParams) -> Result<u64> {
        self.within(self.inner.queue_redrive(params)).await
    }
    async fn queue_get(&self, name: &QueueName) -> Result<Option<QueueSettings>> {
        self.within(self.inner.queue_get(name)).await
    }
    async fn queue_ensure(&self, name: &QueueName, now: i64) -> Result<()> {
        self.within(self.inner.queue_ensure(name, now)).await
    }
    async fn queue_upsert(&self, settings: &QueueSettings, now: i64) -> Result<()> {
        self.within(self.inner.queue_upsert(settings, now)).await
    }
    async fn queue_set_paused(&self, name: &QueueName, paused: bool, now: i64) -> Result<()> {
        self.within(self.inner.queue_set_paused(name, paused, now))
            .await
    }
    async fn queue_list(&self) -> Result<Vec<QueueInfo>> {
        self.within(self.inner.queue_list()).await
    }
    async fn queue_stats(
        &self,
        queue: Option<&QueueName>,
        now: i64,
    ) -> Result<Vec<(String, QueueStats)>> {
        self.within(self.inner.queue_stats(queue, now)).await
    }
    async fn queue_stats_scan(
        &self,
        queue: Option<&QueueName>,
        now: i64,
    ) -> Result<Vec<(String, QueueStats)>> {
        self.within(self.inner.queue_stats_scan(queue, now)).await
    }
    async fn count_fold(&self, now: i64) -> Result<u64> {
        self.within(self.inner.count_fold(now)).await
    }
    async fn stat_add(&self, rows: &[StatRow]) -> Result<()> {
        self.within(self.inner.stat_add(rows)).await
    }
    async fn stat_snapshot(&self, minute: i64, depths: &[(String, StatDepth)]) -> Result<()> {
        self.within(self.inner.stat_snapshot(minute, depths)).await
    }
    async fn stat_history(&self, queue: Option<&QueueName>, since: i64) -> Result<Vec<StatRow>> {
        self.within(self.inner.stat_history(queue, since)).await
    }
    async fn stat_totals(&self) -> Result<Vec<StatRow>> {
        self.within(self.inner.stat_totals()).await
    }
    async fn stat_prune(&self, before: i64) -> Result<u64> {
        self.within(self.inner.stat_prune(before)).await
    }
    async fn audit_add(&self, entry: &AuditEntry) -> Result<i64> {
        self.within(self.inner.audit_add(entry)).await
    }
    async fn audit_list(&self, params: &AuditListParams) -> Result<Vec<AuditEntry>> {
        self.within(self.inner.audit_list(params)).await
    }
    async fn close(&self) {
        // Closing waits for connections in use; a stalled one is dropped after the deadline.
        let close = self.inner.close();
        match self.frame.limit {
            Some(limit) => {
                let _ = tokio::time::timeout(limit, close).await;
            }
            None => close.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_without_an_answer_fails_at_the_deadline() {
        let limit = Duration::from_secs(2);
        let stalled = within(limit, std::future::pending::<Result<()>>());
        let err = stalled.await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        assert!(
            err.to_string()
                .contains("no answer from the database within 2s")
        );
        assert_eq!(within(limit, async { Ok(7) }).await.unwrap(), 7);
    }
}
