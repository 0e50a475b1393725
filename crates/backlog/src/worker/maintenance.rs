//! Maintenance, run only by the elected leader: rescue of expired leases, pruning of finished
//! jobs in bounded batches, reclaiming the job table's dead rows (PostgreSQL), samples of each
//! queue's depth, and periodic jobs that fire exactly once per tick. Each task runs on its own
//! cadence ([`Every`]) by the client's clock; all reach the database through
//! [`MaintenanceOps`], which the [`Client`] implements and tests replace.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::PeriodicJob;
use super::schedule::Fired;
use crate::{Client, EnqueueOutcome, JobState, QueueInfo, QueueStats, Result, Retention};
use backlog_core::{
    CronFireParams, CronSchedule, JobDoneTurnParams, JobPruneParams, JobVacuumParams, JobVacuumed,
    LeaderParams, OldestTransaction, StatDepth, minute_of,
};

/// How long a compaction of the job table waits for its lock before it gives up until the next
/// check: sessions that need the table wait behind it meanwhile.
const COMPACT_LOCK_WAIT: Duration = Duration::from_millis(20);

/// The name leaders are elected under.
pub const LEADER_NAME: &str = "backlog_maintenance";

/// Maintenance settings.
#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    /// A leader that stops renewing is replaced after this long. Failover takes at most
    /// `leader_ttl + renew_every`.
    pub leader_ttl: Duration,
    /// How often every process tries to take or renew the leadership.
    pub renew_every: Duration,
    /// How often the leader rescues expired leases.
    pub rescue_every: Duration,
    /// How often the leader prunes finished jobs.
    pub prune_every: Duration,
    /// Completed jobs (retention `keep`) older than this are deleted.
    pub keep_completed: Duration,
    /// Cancelled jobs older than this are deleted.
    pub keep_cancelled: Duration,
    /// Dead jobs older than this are deleted (`None`: kept until redriven or retried).
    pub keep_dead: Option<Duration>,
    /// Most rows per prune statement.
    pub prune_batch: u32,
    /// How often the leader checks the job table for dead rows (`None`: never). On PostgreSQL
    /// every completed job leaves one; when more than `vacuum_min_dead` plus a tenth of the live
    /// rows have piled up, the leader runs `VACUUM` on the table, so claims do not wade through
    /// dead index entries whether or not autovacuum runs, or runs often enough. Other backends
    /// reclaim by themselves and skip this.
    pub vacuum_every: Option<Duration>,
    /// Dead rows (beyond a tenth of the live ones) that the leader leaves alone.
    pub vacuum_min_dead: u64,
    /// When a `VACUUM` had to leave the dead rows because another session's snapshot may still
    /// see them (a long report, an idle transaction, a replica's `hot_standby_feedback`), the
    /// leader compacts the job table if it holds at most this many rows: it copies them,
    /// empties the table and puts them back, in one transaction that holds the table's lock
    /// for a few milliseconds (PostgreSQL; `backlog_job_compact()` in docs/sql.md). It skips
    /// the table while a session older than its lock wait holds it (that session's snapshot may
    /// read it). On MariaDB, while a transaction of another session has been open 10 s and the
    /// table's tablespace passed 16 MiB, it rebuilds the table online instead (writes go on;
    /// RELIABILITY.md, "Compaction"). 0: never (the rows then stay until the snapshot ends).
    pub compact_max_live: u64,
    /// How often the leader stores each queue's depth in `backlog_stat` (the dashboard's depth
    /// over time); at most once a minute is kept.
    pub sample_every: Duration,
    /// Minutes of `backlog_stat` older than this are folded into each queue's all-time row.
    pub keep_history: Duration,
    /// The leader warns (in its log, each prune pass) when another session has held a
    /// transaction open longer than this: while it does, the database cannot reclaim completed
    /// jobs' rows, which take disk until it ends (PostgreSQL, MySQL; claims keep their speed,
    /// docs/sql.md "Claim cursors"). `None`: never.
    pub warn_transaction_age: Option<Duration>,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        MaintenanceConfig {
            leader_ttl: Duration::from_secs(10),
            renew_every: Duration::from_secs(2),
            rescue_every: Duration::from_secs(1),
            prune_every: Duration::from_secs(30),
            keep_completed: Duration::from_secs(24 * 3600),
            keep_cancelled: Duration::from_secs(7 * 24 * 3600),
            keep_dead: None,
            prune_batch: 1000,
            vacuum_every: Some(Duration::from_secs(5)),
            vacuum_min_dead: 10_000,
            compact_max_live: 10_000,
            sample_every: Duration::from_secs(60),
            keep_history: Duration::from_secs(7 * 24 * 3600),
            warn_transaction_age: Some(Duration::from_secs(300)),
        }
    }
}

/// The calls maintenance makes (the [`Client`]'s, and its backend's).
pub(crate) trait MaintenanceOps: Send + Sync + 'static {
    /// Now, by the client's clock.
    fn now(&self) -> i64;
    /// Takes or renews the leadership; the term when this holder leads.
    fn leader_elect(
        &self,
        params: LeaderParams,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;
    /// Gives the leadership up.
    fn leader_resign(&self, holder: &str) -> impl Future<Output = Result<()>> + Send;
    /// Rescues expired leases (counting them); returns how many.
    fn job_rescue(&self) -> impl Future<Output = Result<u64>> + Send;
    /// Every known queue, with its settings.
    fn queue_list(&self) -> impl Future<Output = Result<Vec<QueueInfo>>> + Send;
    /// Deletes or archives one bounded batch of finished jobs; returns how many.
    fn job_prune(&self, params: JobPruneParams) -> impl Future<Output = Result<u64>> + Send;
    /// Folds the minutes of `backlog_stat` before `before` into the all-time rows.
    fn stat_prune(&self, before: i64) -> impl Future<Output = Result<u64>> + Send;
    /// The oldest transaction another session holds open.
    fn db_oldest_transaction(
        &self,
    ) -> impl Future<Output = Result<Option<OldestTransaction>>> + Send;
    /// Job counts per queue and state.
    fn queue_stats(&self) -> impl Future<Output = Result<Vec<(String, QueueStats)>>> + Send;
    /// Stores each queue's depth in its row of `minute`.
    fn stat_snapshot(
        &self,
        minute: i64,
        depths: Vec<(String, StatDepth)>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Folds the counts the database keeps (a few rows per key again).
    fn count_fold(&self, now: i64) -> impl Future<Output = Result<u64>> + Send;
    /// Empties the tables of completed jobs past their window and turns where completions
    /// write (MySQL's ring); how many tables it emptied.
    fn job_done_turn(&self, params: JobDoneTurnParams) -> impl Future<Output = Result<u64>> + Send;
    /// Reclaims the job table's dead rows if there are enough.
    fn job_vacuum(
        &self,
        params: JobVacuumParams,
    ) -> impl Future<Output = Result<Option<JobVacuumed>>> + Send;
    /// Writes what this leader runs of periodic schedules (`backlog_cron`).
    fn cron_declare(&self, schedules: Vec<CronSchedule>)
    -> impl Future<Output = Result<()>> + Send;

    /// Enqueues a periodic job for a tick, once across processes.
    fn cron_fire(
        &self,
        params: CronFireParams,
    ) -> impl Future<Output = Result<Option<EnqueueOutcome>>> + Send;
}

impl MaintenanceOps for Client {
    fn now(&self) -> i64 {
        Client::now(self)
    }

    async fn leader_elect(&self, params: LeaderParams) -> Result<Option<i64>> {
        self.backend().leader_elect(&params).await
    }

    async fn leader_resign(&self, holder: &str) -> Result<()> {
        self.backend().leader_resign(LEADER_NAME, holder).await
    }

    fn job_rescue(&self) -> impl Future<Output = Result<u64>> + Send {
        self.rescue()
    }

    fn queue_list(&self) -> impl Future<Output = Result<Vec<QueueInfo>>> + Send {
        self.queues()
    }

    async fn job_prune(&self, params: JobPruneParams) -> Result<u64> {
        self.backend().job_prune(params).await
    }

    async fn stat_prune(&self, before: i64) -> Result<u64> {
        self.backend().stat_prune(before).await
    }

    fn db_oldest_transaction(
        &self,
    ) -> impl Future<Output = Result<Option<OldestTransaction>>> + Send {
        self.oldest_transaction()
    }

    fn queue_stats(&self) -> impl Future<Output = Result<Vec<(String, QueueStats)>>> + Send {
        self.stats(None)
    }

    async fn stat_snapshot(&self, minute: i64, depths: Vec<(String, StatDepth)>) -> Result<()> {
        self.backend().stat_snapshot(minute, &depths).await
    }

    async fn count_fold(&self, now: i64) -> Result<u64> {
        self.backend().count_fold(now).await
    }

    async fn job_done_turn(&self, params: JobDoneTurnParams) -> Result<u64> {
        self.backend().job_done_turn(params).await
    }

    async fn job_vacuum(&self, params: JobVacuumParams) -> Result<Option<JobVacuumed>> {
        self.backend().job_vacuum(params).await
    }

    async fn cron_declare(&self, schedules: Vec<CronSchedule>) -> Result<()> {
        self.backend().cron_declare(&schedules).await
    }

    async fn cron_fire(&self, params: CronFireParams) -> Result<Option<EnqueueOutcome>> {
        self.backend().cron_fire(params).await
    }
}

/// A task run every `every` by the client's clock: due at once, then `every` after each run
/// that succeeded (a failed one is tried again at the next pass).
#[derive(Debug, Clone, Copy)]
struct Every {
    every: Duration,
    next: i64,
}

impl Every {
    fn new(every: Duration) -> Self {
        Every { every, next: 0 }
    }

    fn due(&self, now: i64) -> bool {
        now >= self.next
    }

    /// It ran (or, for the vacuum, finished) at `now`.
    fn done(&mut self, now: i64) {
        self.next = now + self.every.as_micros() as i64;
    }
}

/// How often the leader folds the counts the database keeps: what writers added since is read
/// row by row until then (PostgreSQL writes a row per statement and key).
const COUNT_FOLD_EVERY: Duration = Duration::from_secs(5);

/// How often the leader declares its periodic schedules again.
const DECLARE_EVERY: Duration = Duration::from_secs(60);

/// A periodic job's schedule as the leader declares it at `now`.
fn declared(p: &PeriodicJob, now: i64) -> CronSchedule {
    CronSchedule {
        name: p.name.clone(),
        schedule: Some(p.schedule.describe()),
        queue: Some(p.job.queue.as_str().to_owned()),
        kind: p.job.kind.as_ref().map(|k| k.as_str().to_owned()),
        last_tick: 0,
        next_tick: p.schedule.next_tick(now),
        declared_at: Some(now),
    }
}

/// How often the maintenance loop looks: often enough to renew the leadership and to rescue on
/// time, and at least twice a second.
fn pass_every(cfg: &MaintenanceConfig) -> Duration {
    cfg.renew_every
        .min(cfg.rescue_every)
        .min(Duration::from_millis(500))
}

/// Runs maintenance passes until `stop`, then gives the leadership up if this process had it.
pub(crate) async fn run<O: MaintenanceOps>(
    ops: Arc<O>,
    cfg: MaintenanceConfig,
    periodic: Vec<PeriodicJob>,
    owner: String,
    stop: CancellationToken,
) {
    let holder = format!("{owner}:{:08x}", rand::random::<u32>());
    let tick = pass_every(&cfg);
    let mut m = Maintainer::new(ops, cfg, periodic, holder);
    loop {
        if let Err(e) = m.run_once().await {
            tracing::warn!("maintenance pass failed: {e}");
        }
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.cancelled() => break,
        }
    }
    m.resign().await;
}

struct Maintainer<O> {
    ops: Arc<O>,
    cfg: MaintenanceConfig,
    periodic: Vec<PeriodicJob>,
    holder: String,
    term: Option<i64>,
    fired: Fired,
    rescue: Every,
    prune: Every,
    sample: Every,
    fold: Every,
    /// When the periodic schedules are declared again (their next ticks move on).
    declare: Every,
    /// Counts from when the last vacuum finished.
    vacuum: Option<Every>,
    vacuuming: Option<tokio::task::JoinHandle<()>>,
    /// The session last warned about, and its transaction's age then: the same one is named
    /// again only once that age has doubled, so the log is not a line every prune pass.
    warned: Option<(i64, Duration)>,
}

impl<O: MaintenanceOps> Maintainer<O> {
    fn new(
        ops: Arc<O>,
        cfg: MaintenanceConfig,
        periodic: Vec<PeriodicJob>,
        holder: String,
    ) -> Self {
        Maintainer {
            ops,
            rescue: Every::new(cfg.rescue_every),
            prune: Every::new(cfg.prune_every),
            sample: Every::new(cfg.sample_every),
            fold: Every::new(COUNT_FOLD_EVERY),
            declare: Every::new(DECLARE_EVERY),
            vacuum: cfg.vacuum_every.map(Every::new),
            cfg,
            periodic,
            holder,
            term: None,
            fired: Fired::default(),
            vacuuming: None,
            warned: None,
        }
    }

    /// One pass: takes or renews the leadership, and as the leader runs each task that is due.
    async fn run_once(&mut self) -> Result<()> {
        let now = self.ops.now();
        let was = self.term;
        self.term = self
            .ops
            .leader_elect(LeaderParams {
                name: LEADER_NAME.into(),
                holder: self.holder.clone(),
                now,
                expires_at: now + self.cfg.leader_ttl.as_micros() as i64,
            })
            .await?;
        if self.term != was {
            match self.term {
                Some(t) => tracing::info!("{} leads maintenance (term {t})", self.holder),
                None => tracing::info!("{} no longer leads maintenance", self.holder),
            }
        }
        if self.term.is_none() {
            return Ok(());
        }
        if self.rescue.due(now) {
            let n = self.ops.job_rescue().await?;
            if n > 0 {
                tracing::info!("rescued {n} job(s) with expired leases");
            }
            self.rescue.done(now);
        }
        if self.fold.due(now) {
            // Not a reason to skip the other tasks: the counts stay exact unfolded.
            if let Err(e) = self.ops.count_fold(now).await {
                tracing::warn!("folding the job counts failed: {e}");
            }
            self.fold.done(now);
        }
        if self.prune.due(now) {
            self.prune(now).await?;
            let before = minute_of(now - self.cfg.keep_history.as_micros() as i64);
            self.ops.stat_prune(before).await?;
            self.warn_long_transaction().await?;
            self.prune.done(now);
        }
        if self.sample.due(now) {
            self.sample(now).await?;
            self.sample.done(now);
        }
        self.vacuum(now);
        self.fire_periodic(now).await
    }

    /// Starts a vacuum of the job table when one is due and none runs, in a task of its own:
    /// a `VACUUM` of a large table takes seconds, and the leadership must be renewed meanwhile.
    fn vacuum(&mut self, now: i64) {
        let Some(every) = &mut self.vacuum else {
            return;
        };
        // The next check counts from when the last one finished.
        if self.vacuuming.take_if(|t| t.is_finished()).is_some() {
            every.done(now);
        }
        if self.vacuuming.is_some() || !every.due(now) {
            return;
        }
        let ops = self.ops.clone();
        let params = JobVacuumParams {
            min_dead: self.cfg.vacuum_min_dead,
            compact_max_live: self.cfg.compact_max_live,
            compact_lock_wait: COMPACT_LOCK_WAIT,
            done_period: backlog_core::done_period(self.cfg.keep_completed, self.cfg.prune_every),
        };
        self.vacuuming = Some(tokio::spawn(async move {
            match ops.job_vacuum(params).await {
                Ok(Some(v)) => match (v.kept, v.compacted) {
                    _ if v.emptied > 0 && v.dead == 0 => tracing::debug!(
                        "emptied {} partitions of the completed jobs whose rows were all pruned",
                        v.emptied
                    ),
                    (0, _) => tracing::debug!("vacuumed the job table ({} dead rows)", v.dead),
                    (kept, Some(rows)) => tracing::debug!(
                        "compacted the job table: {kept} dead rows that another session's \
                         snapshot kept are gone, {rows} rows kept"
                    ),
                    (kept, None) => tracing::debug!(
                        "{kept} dead rows of the job table stay: another session's snapshot \
                         may see them, and the table was not compacted this time"
                    ),
                },
                Ok(None) => {}
                Err(e) => tracing::warn!("vacuum of the job table failed: {e}"),
            }
        }));
    }

    /// Enqueues each periodic job whose tick is due, once per tick; declares the schedules
    /// (what each is, its next tick) when it starts to lead, every [`DECLARE_EVERY`], and each
    /// one again when it fired.
    async fn fire_periodic(&mut self, now: i64) -> Result<()> {
        if !self.periodic.is_empty() && self.declare.due(now) {
            let all = self.periodic.iter().map(|p| declared(p, now)).collect();
            self.ops.cron_declare(all).await?;
            self.declare.done(now);
        }
        for p in &self.periodic {
            let Some(tick) = self.fired.due(p, now) else {
                continue;
            };
            let mut job = p.job.clone();
            job.run_at = Some(tick);
            let fired = self
                .ops
                .cron_fire(CronFireParams {
                    name: p.name.clone(),
                    tick,
                    job,
                    now,
                })
                .await?;
            if let Some(out) = fired {
                tracing::info!(
                    "periodic job {} fired for tick {tick}: job {}",
                    p.name,
                    out.id
                );
                self.ops.cron_declare(vec![declared(p, now)]).await?;
            }
            self.fired.fired(p, tick);
        }
        Ok(())
    }

    /// Stops a vacuum still running and gives the leadership up, if this process had it.
    async fn resign(&mut self) {
        if let Some(t) = self.vacuuming.take() {
            t.abort();
        }
        if self.term.is_some() {
            let _ = self.ops.leader_resign(&self.holder).await;
        }
    }
    /// Says so when another session's open transaction holds back the reclaiming of rows.
    async fn warn_long_transaction(&mut self) -> Result<()> {
        let Some(limit) = self.cfg.warn_transaction_age else {
            return Ok(());
        };
        // Reading other sessions may need a privilege this user lacks (MySQL: PROCESS).
        let oldest = match self.ops.db_oldest_transaction().await {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!("cannot read the oldest transaction: {e}");
                None
            }
        };
        if let Some(t) = oldest
            && t.age > limit
            && !matches!(self.warned, Some((pid, at)) if pid == t.pid && t.age < at * 2)
        {
            self.warned = Some((t.pid, t.age));
            tracing::warn!(
                pid = t.pid,
                age_s = t.age.as_secs(),
                state = %t.state,
                client = %t.client,
                "session {} ({}) has held a transaction open for {} s ({}): the database keeps \
                 the rows of completed jobs until it ends, and they take disk (PostgreSQL: \
                 unless the leader can compact the job table, see RELIABILITY.md); end it, or \
                 set idle_in_transaction_session_timeout (PostgreSQL) / \
                 idle_transaction_timeout (MariaDB)",
                t.pid,
                t.client,
                t.age.as_secs(),
                t.state
            );
        }
        Ok(())
    }

    /// Stores each queue's depth in its `backlog_stat` row of this minute.
    async fn sample(&self, now: i64) -> Result<()> {
        let depths: Vec<(String, StatDepth)> = self
            .ops
            .queue_stats()
            .await?
            .into_iter()
            .map(|(queue, s)| {
                let depth = StatDepth {
                    available: s.available,
                    // The history's depth keeps every job due later, retries included.
                    scheduled: s.scheduled + s.retrying,
                    running: s.running,
                    dead: s.dead,
                };
                (queue, depth)
            })
            .collect();
        self.ops.stat_snapshot(minute_of(now), depths).await
    }

    async fn prune(&self, now: i64) -> Result<()> {
        let micros = |d: Duration| d.as_micros() as i64;
        // Completed jobs kept in a ring of tables (MySQL) go a table at a time, before the
        // prune deletes what is left past the window row by row.
        let emptied = self
            .ops
            .job_done_turn(JobDoneTurnParams {
                now,
                period: backlog_core::done_period(self.cfg.keep_completed, self.cfg.prune_every),
                finished_before: now - micros(self.cfg.keep_completed),
            })
            .await?;
        if emptied > 0 {
            tracing::debug!("emptied {emptied} tables of completed jobs past their window");
        }
        for info in self.ops.queue_list().await? {
            let s = &info.settings;
            let mut rules = vec![
                (JobState::Completed, now - micros(self.cfg.keep_completed)),
                (JobState::Cancelled, now - micros(self.cfg.keep_cancelled)),
            ];
            if let Some(d) = self.cfg.keep_dead {
                rules.push((JobState::Dead, now - micros(d)));
            }
            for (state, before) in rules {
                loop {
                    let n = self
                        .ops
                        .job_prune(JobPruneParams {
                            queue: s.name.clone(),
                            state,
                            finished_before: before,
                            limit: self.cfg.prune_batch,
                            archive: s.retention == Retention::Archive,
                        })
                        .await?;
                    if n < self.cfg.prune_batch as u64 {
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::worker::Schedule;
    use crate::worker::fakes::{self, T0};
    use crate::{Clock as _, Error, ManualClock, NewJob, Payload, QueueName, QueueSettings};

    /// Answers as the leader (unless `leads` is false), with the queues `queues`; each
    /// `job_prune` removes the next of `prune_rows` (then none); `rescue_fails` rescues fail;
    /// a vacuum takes `vacuum_takes` of tokio's time. Records each call.
    #[derive(Default)]
    struct FakeOps {
        clock: ManualClock,
        leads: bool,
        queues: Vec<QueueInfo>,
        prune_rows: Mutex<VecDeque<u64>>,
        rescue_fails: Mutex<u32>,
        vacuum_takes: Duration,
        calls: Mutex<Vec<String>>,
    }

    impl FakeOps {
        fn call(&self, call: impl Into<String>) {
            self.calls.lock().unwrap().push(call.into());
        }

        /// The calls since the last look, by name.
        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().drain(..).collect()
        }
    }

    impl MaintenanceOps for FakeOps {
        fn now(&self) -> i64 {
            self.clock.now()
        }

        async fn leader_elect(&self, p: LeaderParams) -> Result<Option<i64>> {
            assert_eq!(p.expires_at - p.now, 10_000_000, "leader_ttl");
            self.call("leader_elect");
            Ok(self.leads.then_some(1))
        }

        async fn leader_resign(&self, holder: &str) -> Result<()> {
            self.call(format!(
                "leader_resign {}",
                holder.split(':').next().unwrap()
            ));
            Ok(())
        }

        async fn job_rescue(&self) -> Result<u64> {
            self.call("job_rescue");
            let mut fails = self.rescue_fails.lock().unwrap();
            if *fails > 0 {
                *fails -= 1;
                return Err(fakes::transient());
            }
            Ok(0)
        }

        async fn queue_list(&self) -> Result<Vec<QueueInfo>> {
            Ok(self.queues.clone())
        }

        async fn job_prune(&self, p: JobPruneParams) -> Result<u64> {
            let age = (self.clock.now() - p.finished_before) / 3_600_000_000;
            let how = if p.archive { "archive" } else { "delete" };
            self.call(format!("job_prune {} {:?} {age}h {how}", p.queue, p.state));
            Ok(self.prune_rows.lock().unwrap().pop_front().unwrap_or(0))
        }

        async fn stat_prune(&self, _: i64) -> Result<u64> {
            self.call("stat_prune");
            Ok(0)
        }

        async fn db_oldest_transaction(&self) -> Result<Option<OldestTransaction>> {
            Err(Error::Unsupported("not allowed to look"))
        }

        async fn queue_stats(&self) -> Result<Vec<(String, QueueStats)>> {
            Ok(vec![("q".into(), QueueStats::default())])
        }

        async fn stat_snapshot(&self, minute: i64, depths: Vec<(String, StatDepth)>) -> Result<()> {
            assert_eq!(minute, minute_of(self.clock.now()));
            self.call(format!("stat_snapshot of {} queue(s)", depths.len()));
            Ok(())
        }

        async fn count_fold(&self, _: i64) -> Result<u64> {
            Ok(0)
        }

        async fn job_done_turn(&self, _: JobDoneTurnParams) -> Result<u64> {
            self.call("job_done_turn");
            Ok(0)
        }

        async fn job_vacuum(&self, _: JobVacuumParams) -> Result<Option<JobVacuumed>> {
            self.call("job_vacuum");
            tokio::time::sleep(self.vacuum_takes).await;
            Ok(None)
        }

        async fn cron_declare(&self, _: Vec<CronSchedule>) -> Result<()> {
            Ok(())
        }

        async fn cron_fire(&self, p: CronFireParams) -> Result<Option<EnqueueOutcome>> {
            assert_eq!(p.job.run_at, Some(p.tick));
            let at = (p.tick - T0) / 1_000_000;
            self.call(format!("cron_fire {} T0+{at}s", p.name));
            Ok((at == 0).then_some(EnqueueOutcome {
                id: 1,
                created: true,
            }))
        }
    }

    fn leader(ops: FakeOps, cfg: impl FnOnce(&mut MaintenanceConfig)) -> Maintainer<FakeOps> {
        let mut c = MaintenanceConfig {
            vacuum_every: None,
            ..MaintenanceConfig::default()
        };
        cfg(&mut c);
        let ops = FakeOps {
            clock: ManualClock::new(T0),
            leads: true,
            ..ops
        };
        Maintainer::new(Arc::new(ops), c, vec![], "host:1:cafe".into())
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[tokio::test]
    async fn a_process_that_does_not_lead_maintains_nothing() {
        let mut m = leader(FakeOps::default(), |_| {});
        Arc::get_mut(&mut m.ops).unwrap().leads = false;
        m.run_once().await.unwrap();
        assert_eq!(m.ops.calls(), ["leader_elect"]);
        m.resign().await;
        assert!(m.ops.calls().is_empty(), "nothing to resign");
    }

    #[tokio::test]
    async fn the_leader_runs_each_task_on_its_own_cadence() {
        let mut m = leader(FakeOps::default(), |_| {});
        let mut pass = async |advance| {
            m.ops.clock.advance(advance);
            m.run_once().await.unwrap();
            m.ops.calls()
        };
        let everything = [
            "leader_elect",
            "job_rescue",
            "job_done_turn",
            "stat_prune",
            "stat_snapshot of 1 queue(s)",
        ];
        assert_eq!(pass(Duration::ZERO).await, everything);
        assert_eq!(pass(Duration::from_millis(500)).await, ["leader_elect"]);
        assert_eq!(
            pass(Duration::from_millis(500)).await,
            ["leader_elect", "job_rescue"]
        );
        for _ in 0..28 {
            pass(secs(1)).await;
        }
        assert_eq!(
            pass(secs(1)).await,
            ["leader_elect", "job_rescue", "job_done_turn", "stat_prune"]
        );
        for _ in 0..29 {
            pass(secs(1)).await;
        }
        assert_eq!(
            pass(secs(1)).await,
            everything,
            "prune every 30 s, sample every 60 s"
        );
        m.resign().await;
        assert_eq!(m.ops.calls(), ["leader_resign host"]);
    }

    #[tokio::test]
    async fn a_failed_task_ends_the_pass_and_is_tried_again_at_the_next() {
        let ops = FakeOps {
            rescue_fails: Mutex::new(1),
            ..Default::default()
        };
        let mut m = leader(ops, |_| {});
        assert!(m.run_once().await.is_err());
        assert_eq!(m.ops.calls(), ["leader_elect", "job_rescue"]);
        m.run_once().await.unwrap();
        assert_eq!(
            m.ops.calls()[..4],
            ["leader_elect", "job_rescue", "job_done_turn", "stat_prune"]
        );
    }

    #[tokio::test]
    async fn pruning_takes_full_batches_until_each_queue_and_state_is_done() {
        let queue = |name: &str, retention| QueueInfo {
            settings: QueueSettings {
                retention,
                ..QueueSettings::defaults(QueueName::new(name).unwrap())
            },
            pending: 0,
        };
        let ops = FakeOps {
            queues: vec![queue("a", Retention::Keep), queue("b", Retention::Archive)],
            prune_rows: Mutex::new([10, 10, 3].into()),
            ..Default::default()
        };
        let mut m = leader(ops, |c| {
            c.prune_batch = 10;
            c.keep_completed = secs(2 * 3600);
            c.keep_dead = Some(secs(48 * 3600));
        });
        m.run_once().await.unwrap();
        let prunes: Vec<_> = m
            .ops
            .calls()
            .into_iter()
            .filter(|c| c.starts_with("job_prune"))
            .collect();
        assert_eq!(
            prunes,
            [
                "job_prune a Completed 2h delete",
                "job_prune a Completed 2h delete",
                "job_prune a Completed 2h delete",
                "job_prune a Cancelled 168h delete",
                "job_prune a Dead 48h delete",
                "job_prune b Completed 2h archive",
                "job_prune b Cancelled 168h archive",
                "job_prune b Dead 48h archive",
            ]
        );
    }

    #[tokio::test]
    async fn a_periodic_job_fires_once_per_tick_of_its_schedule() {
        let mut m = leader(FakeOps::default(), |_| {});
        let job = NewJob::new(
            QueueName::new("q").unwrap(),
            Payload::parse("{}", 10).unwrap(),
        );
        m.periodic = vec![
            PeriodicJob::new("minutely", Schedule::Every(secs(60)), job.clone()),
            PeriodicJob::new("hourly", Schedule::cron("0 * * * *").unwrap(), job),
        ];
        let mut fired = async |advance| {
            m.ops.clock.advance(advance);
            m.run_once().await.unwrap();
            let calls = m.ops.calls().into_iter();
            calls
                .filter(|c| c.starts_with("cron_fire"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            fired(secs(0)).await,
            ["cron_fire minutely T0+0s", "cron_fire hourly T0+0s"]
        );
        assert!(fired(secs(59)).await.is_empty());
        // Another process fired this one (nothing enqueued here): not tried again either.
        assert_eq!(fired(secs(1)).await, ["cron_fire minutely T0+60s"]);
        assert!(fired(secs(1)).await.is_empty());
        // Ticks missed (no pass for ten minutes) are not made up: the latest fires.
        assert_eq!(fired(secs(600)).await, ["cron_fire minutely T0+660s"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_vacuum_runs_apart_and_the_next_counts_from_its_end() {
        let ops = FakeOps {
            vacuum_takes: secs(3),
            ..Default::default()
        };
        let mut m = leader(ops, |c| c.vacuum_every = Some(secs(5)));
        let vacuums = |m: &Maintainer<FakeOps>| {
            let calls = m.ops.calls();
            calls.iter().filter(|c| *c == "job_vacuum").count()
        };
        m.run_once().await.unwrap();
        tokio::task::yield_now().await;
        assert_eq!(vacuums(&m), 1);
        // Due again by the clock, but the first still runs.
        m.ops.clock.advance(secs(6));
        m.run_once().await.unwrap();
        assert_eq!(vacuums(&m), 0);
        tokio::time::sleep(secs(4)).await; // it finishes
        m.run_once().await.unwrap();
        tokio::task::yield_now().await;
        assert_eq!(vacuums(&m), 0, "the next is due 5 s after this one ended");
        m.ops.clock.advance(secs(5));
        m.run_once().await.unwrap();
        tokio::task::yield_now().await;
        assert_eq!(vacuums(&m), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_passes_twice_a_second_and_resigns_when_stopped() {
        let ops = Arc::new(FakeOps {
            clock: ManualClock::new(T0),
            leads: true,
            ..Default::default()
        });
        let cfg = MaintenanceConfig {
            vacuum_every: None,
            ..MaintenanceConfig::default()
        };
        assert_eq!(pass_every(&cfg), Duration::from_millis(500));
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(ops.clone(), cfg, vec![], "host:1".into(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(1250)).await;
        stop.cancel();
        task.await.unwrap();
        let calls = ops.calls();
        let elections = calls.iter().filter(|c| *c == "leader_elect").count();
        assert_eq!(elections, 3, "at 0, 500 and 1,000 ms");
        assert_eq!(calls.last().unwrap(), "leader_resign host");
    }
}
