//! Maintenance, run only by the elected leader: rescue of expired leases, pruning of finished
//! jobs in bounded batches, reclaiming the job table's dead rows (PostgreSQL), and periodic jobs
//! that fire exactly once per tick.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{Client, Error, JobState, NewJob, Result, Retention};
use backlog_core::{
    CronFireParams, JobPruneParams, JobVacuumParams, LeaderParams, StatDepth, minute_of,
};

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
    /// How often the leader stores each queue's depth in `backlog_stat` (the dashboard's depth
    /// over time); at most once a minute is kept.
    pub sample_every: Duration,
    /// Minutes of `backlog_stat` older than this are folded into each queue's all-time row.
    pub keep_history: Duration,
    /// The leader warns (in its log, each prune pass) when another session has held a
    /// transaction open longer than this: while it does, the database cannot reclaim completed
    /// jobs' rows and claims slow down (PostgreSQL, MySQL). `None`: never.
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
            sample_every: Duration::from_secs(60),
            keep_history: Duration::from_secs(7 * 24 * 3600),
            warn_transaction_age: Some(Duration::from_secs(300)),
        }
    }
}

/// When a periodic job fires.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// At every multiple of this interval since the Unix epoch.
    Every(Duration),
    /// At the times a cron expression names (UTC), e.g. `0 3 * * *`.
    Cron(Box<croner::Cron>),
}

impl Schedule {
    /// Reads a cron expression (5 or 6 fields).
    pub fn cron(expr: &str) -> Result<Self> {
        croner::Cron::from_str(expr)
            .map(|c| Schedule::Cron(Box::new(c)))
            .map_err(|e| Error::OptionInvalid {
                what: "cron expression",
                value: format!("{expr} ({e})"),
                expected: "a cron expression such as \"0 3 * * *\"",
            })
    }

    /// The latest tick at or before `now` (microseconds since the epoch).
    pub fn last_tick(&self, now: i64) -> Option<i64> {
        match self {
            Schedule::Every(d) => {
                let d = d.as_micros().max(1) as i64;
                Some(now.div_euclid(d) * d)
            }
            Schedule::Cron(c) => {
                let t = chrono::DateTime::from_timestamp_micros(now)?;
                c.find_previous_occurrence(&t, true)
                    .ok()
                    .map(|t| t.timestamp_micros())
            }
        }
    }
}

/// A job enqueued once per tick of its schedule by the leader, however many processes run.
/// Ticks missed while no leader ran are not made up: the latest tick fires, once.
#[derive(Debug, Clone)]
pub struct PeriodicJob {
    /// Unique name of the schedule.
    pub name: String,
    /// When it fires.
    pub schedule: Schedule,
    /// What is enqueued (`run_at` is set to the tick).
    pub job: NewJob,
}

impl PeriodicJob {
    /// A periodic job.
    pub fn new(name: impl Into<String>, schedule: Schedule, job: NewJob) -> Self {
        PeriodicJob {
            name: name.into(),
            schedule,
            job,
        }
    }
}

pub(crate) async fn run(
    client: Arc<Client>,
    cfg: MaintenanceConfig,
    periodic: Vec<PeriodicJob>,
    owner: String,
    stop: CancellationToken,
) {
    let holder = format!("{owner}:{:08x}", rand::random::<u32>());
    let mut m = Maintainer {
        client,
        cfg,
        periodic,
        holder,
        term: None,
        last_fired: HashMap::new(),
        next_rescue: 0,
        next_prune: 0,
        next_sample: 0,
        next_vacuum: 0,
        vacuuming: None,
    };
    let tick = m
        .cfg
        .renew_every
        .min(m.cfg.rescue_every)
        .min(Duration::from_millis(500));
    loop {
        if let Err(e) = m.run_once().await {
            tracing::warn!("maintenance pass failed: {e}");
        }
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.cancelled() => break,
        }
    }
    if let Some(t) = m.vacuuming.take() {
        t.abort();
    }
    if m.term.is_some() {
        let _ = m
            .client
            .backend()
            .leader_resign(LEADER_NAME, &m.holder)
            .await;
    }
}

struct Maintainer {
    client: Arc<Client>,
    cfg: MaintenanceConfig,
    periodic: Vec<PeriodicJob>,
    holder: String,
    term: Option<i64>,
    last_fired: HashMap<String, i64>,
    next_rescue: i64,
    next_prune: i64,
    next_sample: i64,
    next_vacuum: i64,
    vacuuming: Option<tokio::task::JoinHandle<()>>,
}

impl Maintainer {
    async fn run_once(&mut self) -> Result<()> {
        let now = self.client.now();
        let was = self.term;
        self.term = self
            .client
            .backend()
            .leader_elect(&LeaderParams {
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
        if now >= self.next_rescue {
            let n = self.client.rescue().await?;
            if n > 0 {
                tracing::info!("rescued {n} job(s) with expired leases");
            }
            self.next_rescue = now + self.cfg.rescue_every.as_micros() as i64;
        }
        if now >= self.next_prune {
            self.prune(now).await?;
            let before = minute_of(now - self.cfg.keep_history.as_micros() as i64);
            self.client.backend().stat_prune(before).await?;
            self.warn_long_transaction().await?;
            self.next_prune = now + self.cfg.prune_every.as_micros() as i64;
        }
        if now >= self.next_sample {
            self.sample(now).await?;
            self.next_sample = now + self.cfg.sample_every.as_micros() as i64;
        }
        if let Some(every) = self.cfg.vacuum_every {
            // The next check counts from when the last one finished.
            if self.vacuuming.take_if(|t| t.is_finished()).is_some() {
                self.next_vacuum = now + every.as_micros() as i64;
            }
            if self.vacuuming.is_none() && now >= self.next_vacuum {
                // In a task of its own: a VACUUM of a large table takes seconds, and the
                // leadership must be renewed meanwhile.
                let client = self.client.clone();
                let params = JobVacuumParams {
                    min_dead: self.cfg.vacuum_min_dead,
                };
                self.vacuuming = Some(tokio::spawn(async move {
                    match client.backend().job_vacuum(params).await {
                        Ok(Some(dead)) => {
                            tracing::debug!("vacuumed the job table ({dead} dead rows)")
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!("vacuum of the job table failed: {e}"),
                    }
                }));
            }
        }
        for p in &self.periodic {
            let Some(tick) = p.schedule.last_tick(now) else {
                continue;
            };
            if self.last_fired.get(&p.name).is_some_and(|&t| t >= tick) {
                continue;
            }
            let mut job = p.job.clone();
            job.run_at = Some(tick);
            let fired = self
                .client
                .backend()
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
            }
            self.last_fired.insert(p.name.clone(), tick);
        }
        Ok(())
    }

    /// Says so when another session's open transaction holds back the reclaiming of rows.
    async fn warn_long_transaction(&self) -> Result<()> {
        let Some(limit) = self.cfg.warn_transaction_age else {
            return Ok(());
        };
        // Reading other sessions may need a privilege this user lacks (MySQL: PROCESS).
        let oldest = match self.client.oldest_transaction().await {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!("cannot read the oldest transaction: {e}");
                None
            }
        };
        if let Some(t) = oldest
            && t.age > limit
        {
            tracing::warn!(
                pid = t.pid,
                age_s = t.age.as_secs(),
                state = %t.state,
                client = %t.client,
                "session {} ({}) has held a transaction open for {} s ({}): the database keeps \
                 the rows of completed jobs until it ends, and claims slow down; end it, or set \
                 idle_in_transaction_session_timeout (PostgreSQL) / wait_timeout (MySQL)",
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
            .client
            .stats(None)
            .await?
            .into_iter()
            .map(|(queue, s)| {
                let depth = StatDepth {
                    available: s.available,
                    scheduled: s.scheduled,
                    running: s.running,
                    dead: s.dead,
                };
                (queue, depth)
            })
            .collect();
        self.client
            .backend()
            .stat_snapshot(minute_of(now), &depths)
            .await
    }

    async fn prune(&self, now: i64) -> Result<()> {
        let micros = |d: Duration| d.as_micros() as i64;
        for info in self.client.queues().await? {
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
                        .client
                        .backend()
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
