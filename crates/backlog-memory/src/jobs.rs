//! The operations on jobs: what the statements of `backlog_job` do in the SQL backends, step for
//! step (the SQLite file each follows is named on it).

use backlog_core::{
    AdminAction, ClaimedJob, DbErrorKind, Due, EnqueueOutcome, Error, ErrorRecord, Job,
    JobClaimParams, JobCompleteParams, JobCountPendingParams, JobFailParams, JobHeartbeatParams,
    JobListParams, JobProgressParams, JobPruneParams, JobRef, JobReleaseParams, JobRescueParams,
    JobState, NewJob, QueueRedriveParams, QueueSettings, Rescued, Result, Retention, StateFilter,
};

use crate::state::{State, check_json, check_violation, unique_violation};
use crate::table::{holds_key, kind_in};

/// The CHECK constraints of `backlog_job` that a new job can break, checked for every job
/// before any goes in.
pub(crate) fn check_new(jobs: &[NewJob]) -> Result<()> {
    backlog_core::check_dependencies(jobs)?;
    for job in jobs {
        if let Some(m) = job.max_attempts.filter(|&m| m < 1) {
            return Err(check_violation(format!("max_attempts >= 1 (got {m})")));
        }
    }
    Ok(())
}

impl State {
    /// `job_insert.sql`: every job is checked before any goes in; a unique key an unfinished job
    /// of the queue holds (one inserted earlier in the batch too) gives that job's id.
    pub fn job_insert(&mut self, jobs: Vec<NewJob>, now: i64) -> Result<Vec<EnqueueOutcome>> {
        check_new(&jobs)?;
        self.check_parents(&jobs)?;
        let mut grouped: Vec<(String, String)> = jobs
            .iter()
            .filter_map(|j| {
                Some((
                    j.queue.as_str().to_owned(),
                    j.group.as_ref()?.as_str().to_owned(),
                ))
            })
            .collect();
        let out = jobs.into_iter().map(|j| self.insert_one(j, now)).collect();
        grouped.sort_unstable();
        grouped.dedup();
        for (queue, group) in grouped {
            self.group_promote(&queue, std::slice::from_ref(&group), now);
        }
        Ok(out)
    }

    /// `group_promote.sql`: in each group, the first due waiting jobs (in enqueue order) made
    /// available while fewer than the queue's group concurrency are available or running; under
    /// a group rate limit, each paced (`group_pace.sql`): due when the limit lets it start.
    pub fn group_promote(&mut self, queue: &str, groups: &[String], now: i64) -> u64 {
        let room = self.queues.get(queue).map_or(1, |q| q.group_concurrency) as usize;
        let rate = self.queues.get(queue).and_then(|q| q.group_rate_limit);
        let mut promoted = 0;
        for group in groups {
            let of_group = |j: &&Job| j.queue == queue && j.group.as_deref() == Some(group);
            loop {
                let active = (self.jobs.rows().filter(of_group))
                    .filter(|j| matches!(j.state, JobState::Available | JobState::Running))
                    .count();
                let next = (self.jobs.rows().filter(of_group))
                    .filter(|j| j.state == JobState::Waiting && j.run_at <= now)
                    .map(|j| j.id)
                    .min();
                let Some(id) = next.filter(|_| active < room) else {
                    break;
                };
                let key = (queue.to_owned(), group.clone());
                let start = rate.map_or(now, |r| {
                    let (start, at) = r.pace(self.group_rate.get(&key).copied(), now);
                    self.group_rate.insert(key, at);
                    start
                });
                self.jobs.update(id, |j| {
                    j.state = JobState::Available;
                    if start > now {
                        j.run_at = start;
                    }
                });
                if start <= now {
                    self.woke(queue);
                }
                promoted += 1;
            }
        }
        promoted
    }

    /// `group_stalled.sql` then `group_promote.sql`: every group with a due waiting job.
    pub fn group_sweep(&mut self, now: i64) -> u64 {
        let mut stalled: Vec<(String, String)> = (self.jobs.rows())
            .filter(|j| j.state == JobState::Waiting && j.run_at <= now)
            .filter_map(|j| Some((j.queue.clone(), j.group.clone()?)))
            .collect();
        stalled.sort_unstable();
        stalled.dedup();
        (stalled.into_iter())
            .map(|(queue, group)| self.group_promote(&queue, &[group], now))
            .sum()
    }

    /// `queue_flow.sql` and `group_blocked.sql`.
    pub fn queue_flow(&self, queue: &str, now: i64) -> backlog_core::QueueFlow {
        let of_queue = || self.jobs.rows().filter(move |j| j.queue == queue);
        let waiting_in = |g: &str| {
            of_queue()
                .filter(|j| j.state == JobState::Waiting && j.group.as_deref() == Some(g))
                .count() as i64
        };
        let mut groups: Vec<&str> = of_queue()
            .filter(|j| j.state == JobState::Waiting)
            .filter_map(|j| j.group.as_deref())
            .collect();
        groups.sort_unstable();
        groups.dedup();
        let mut blocked: Vec<backlog_core::BlockedGroup> = of_queue()
            .filter(|j| j.state == JobState::Available && j.run_at > now)
            .filter_map(|j| {
                let group = j.group.clone()?;
                Some(backlog_core::BlockedGroup {
                    waiting: waiting_in(&group),
                    group,
                    job_id: j.id,
                    retry_at: j.run_at,
                    reason: backlog_core::BlockReason::of_attempts(j.attempt),
                })
            })
            .collect();
        blocked.sort_by_key(|b| (-b.waiting, b.job_id));
        blocked.truncate(20);
        backlog_core::QueueFlow {
            running: of_queue().filter(|j| j.state == JobState::Running).count() as i64,
            waiting: of_queue().filter(|j| j.state == JobState::Waiting).count() as i64,
            waiting_groups: groups.len() as i64,
            blocked,
        }
    }

    /// The state a job that would become available takes: waiting, in an ordered group or for
    /// parents not yet ended.
    fn available_or_waiting(job: &Job) -> JobState {
        if job.group.is_some() || job.deps_left > 0 {
            JobState::Waiting
        } else {
            JobState::Available
        }
    }

    fn insert_one(&mut self, job: NewJob, now: i64) -> EnqueueOutcome {
        if let Some(key) = &job.unique_key
            && let Some(id) = self.jobs.key_holder(job.queue.as_str(), key.as_str())
        {
            return EnqueueOutcome { id, created: false };
        }
        let id = self.jobs.next_id();
        self.insert_row(id, job, now);
        EnqueueOutcome { id, created: true }
    }

    /// `ParentNotFound` for the first parent of `jobs` that is not a job (never was, or pruned).
    pub(crate) fn check_parents(&self, jobs: &[NewJob]) -> Result<()> {
        for d in jobs.iter().flat_map(|j| &j.depends_on) {
            if self.jobs.get_or_archived(d.parent).is_none() {
                return Err(Error::ParentNotFound { parent: d.parent });
            }
        }
        Ok(())
    }

    /// `job_insert_deps.sql`: a new job's parents. Each one still unfinished is marked as
    /// having dependents and counted in the job's `deps_left`, and the job waits for them; a
    /// parent that ended already counts as ended, so one that ended dead or cancelled cancels
    /// the job at once where its policy says so. The parents must exist ([`Self::check_parents`]).
    fn attach_parents(&mut self, child: i64, deps: &[backlog_core::Dependency], now: i64) {
        let mut left = 0;
        let mut doomed = None;
        for d in deps {
            self.deps
                .entry(d.parent)
                .or_default()
                .push((child, d.on_failure));
            match self.jobs.get_or_archived(d.parent).map(|p| p.state) {
                Some(s) if !s.is_finished() => left += 1,
                Some(s @ (JobState::Dead | JobState::Cancelled))
                    if d.on_failure == backlog_core::OnParentFailure::Cancel =>
                {
                    doomed.get_or_insert((d.parent, s));
                }
                _ => {}
            }
        }
        self.jobs.update(child, |j| {
            j.deps_left = left;
            if let Some((parent, s)) = doomed {
                j.state = JobState::Cancelled;
                j.finished_at = Some(now);
                j.errors
                    .push(parent_failed(j.attempt, now, parent, s.as_str()));
            } else if left > 0 {
                j.state = JobState::Waiting;
            }
        });
    }

    /// What the database's `backlog_job_deps` triggers do when jobs with dependents end
    /// (`ended`: each parent and how it ended: `completed`, `dead`, `cancelled` or `deleted`):
    /// each waiting child counts one parent fewer and is released (available, due no earlier
    /// than `now`) when none is left; a child whose parent failed with policy `cancel` is
    /// cancelled, which ends it in turn (the cascade).
    pub(crate) fn parents_ended(&mut self, ended: Vec<(i64, &'static str)>, now: i64) {
        let mut ended = ended;
        while let Some((parent, how)) = ended.pop() {
            let Some(children) = self.deps.get(&parent).cloned() else {
                continue;
            };
            for (child, policy) in children {
                let waiting = self
                    .jobs
                    .get(child)
                    .is_some_and(|j| j.state == JobState::Waiting && j.deps_left > 0);
                if !waiting {
                    continue;
                }
                let doom = how != "completed" && policy == backlog_core::OnParentFailure::Cancel;
                let queue = self.jobs.update(child, |j| {
                    j.deps_left -= 1;
                    if doom {
                        j.state = JobState::Cancelled;
                        j.finished_at = Some(now);
                        j.errors.push(parent_failed(j.attempt, now, parent, how));
                    } else if j.deps_left == 0 {
                        j.state = JobState::Available;
                        j.run_at = j.run_at.max(now);
                    }
                    (
                        j.queue.clone(),
                        j.state == JobState::Available && j.run_at <= now,
                    )
                });
                match queue {
                    Some(_) if doom => ended.push((child, "cancelled")),
                    Some((queue, true)) => self.woke(&queue),
                    _ => {}
                }
            }
        }
    }

    /// [`Self::parents_ended`] for one job that ended `how`, if it has dependents.
    fn ended(&mut self, id: i64, how: &'static str, now: i64) {
        if self.deps.contains_key(&id) {
            self.parents_ended(vec![(id, how)], now);
        }
    }

    /// Adds a new available job under `id` (from [`crate::table::Table::next_id`]), waking its
    /// queue if it is due. Its unique key, if any, must be free.
    pub fn insert_row(&mut self, id: i64, mut job: NewJob, now: i64) {
        let deps = std::mem::take(&mut job.depends_on);
        self.insert_fresh(id, job, now);
        if !deps.is_empty() {
            self.attach_parents(id, &deps, now);
        }
    }

    fn insert_fresh(&mut self, id: i64, job: NewJob, now: i64) {
        let queue = job.queue.as_str();
        let run_at = job.run_at.unwrap_or(now);
        if run_at <= now {
            self.woke(queue);
        }
        self.jobs.insert(Job {
            id,
            queue: queue.to_owned(),
            kind: job.kind.map(|k| k.as_str().to_owned()),
            state: match job.group {
                Some(_) => JobState::Waiting,
                None => JobState::Available,
            },
            payload: job.payload.into_string(),
            priority: job.priority,
            run_at,
            attempt: 0,
            max_attempts: job.max_attempts,
            lease_token: None,
            lease_owner: None,
            lease_expires_at: None,
            unique_key: job.unique_key.map(|k| k.as_str().to_owned()),
            errors: vec![],
            result: None,
            progress: None,
            created_at: now,
            attempted_at: None,
            finished_at: None,
            cancel_requested_at: None,
            trace_context: job.trace_context,
            group: job.group.map(|g| g.as_str().to_owned()),
            archived: false,
            deps_left: 0,
        });
    }

    /// `job_claim_fifo.sql`, `job_claim_lifo.sql`: every strategy is this one, as one lock
    /// makes this backend a single writer.
    pub fn job_claim(&mut self, p: &JobClaimParams) -> Vec<ClaimedJob> {
        let settings = self.queues.get(p.queue.as_str());
        if settings.is_some_and(|q| q.paused) {
            return vec![];
        }
        // `job_claim_limited_*.sql` under the limit, which `job_claim_*.sql` never claims under.
        let mut limit = p.limit as usize;
        let global = settings.and_then(|q| q.global_concurrency);
        let rate = settings.and_then(|q| q.rate_limit);
        let group_rate = settings.and_then(|q| q.group_rate_limit);
        if (global.is_some() || rate.is_some() || group_rate.is_some()) && !p.global_limit {
            return vec![];
        }
        if let Some(max) = global {
            let running = (self.jobs.rows())
                .filter(|j| j.queue == p.queue.as_str() && j.state == JobState::Running)
                .count();
            limit = limit.min((max as usize).saturating_sub(running));
        }
        // `queue_rate_take.sql`'s token bucket.
        let mut level = None;
        if let Some(r) = rate {
            let (n, period) = (f64::from(r.starts), r.period.as_micros() as f64);
            let now_level = match self.rate.get(p.queue.as_str()) {
                Some(&(tokens, at)) => tokens + (p.now - at).max(0) as f64 * n / period,
                None => n,
            }
            .min(n);
            limit = limit.min(now_level.floor() as usize);
            level = Some(now_level);
        }
        let ids = self
            .jobs
            .claimable(p.queue.as_str(), &p.kinds, p.now, p.order, limit);
        if ids.is_empty() {
            return vec![];
        }
        if let Some(level) = level {
            let left = (level - ids.len() as f64).max(0.0);
            self.rate.insert(p.queue.as_str().to_owned(), (left, p.now));
        }
        let token = self.new_token();
        let expires = p.now + p.lease.as_micros() as i64;
        let claimed: Vec<ClaimedJob> = ids
            .into_iter()
            .filter_map(|id| {
                self.jobs.update(id, |j| {
                    j.state = JobState::Running;
                    j.attempt += 1;
                    j.lease_token = Some(token);
                    j.lease_owner = Some(p.owner.clone());
                    j.lease_expires_at = Some(expires);
                    j.attempted_at = Some(p.now);
                    ClaimedJob {
                        id,
                        queue: j.queue.clone(),
                        kind: j.kind.clone(),
                        payload: j.payload.clone(),
                        priority: j.priority,
                        attempt: j.attempt,
                        max_attempts: j.max_attempts,
                        lease_token: token,
                        lease_expires_at: expires,
                        run_at: j.run_at,
                        created_at: j.created_at,
                        trace_context: j.trace_context.clone(),
                        group: j.group.clone(),
                    }
                })
            })
            .collect();
        // `group_rate_started.sql`: each group's rate-limit time at least this start's.
        if let Some(r) = group_rate {
            let by = p.now + r.step();
            for group in claimed.iter().filter_map(|j| j.group.clone()) {
                // Only a group paced before has a time to move (its promotion made it).
                if let Some(at) = self
                    .group_rate
                    .get_mut(&(p.queue.as_str().to_owned(), group))
                {
                    *at = (*at).max(by);
                }
            }
        }
        claimed
    }

    /// Whether a job is running under this lease.
    pub fn leased(&self, r: JobRef) -> bool {
        self.jobs
            .get(r.id)
            .is_some_and(|j| j.state == JobState::Running && j.lease_token == Some(r.token))
    }

    /// Changes a job running under this lease; `LeaseLost` when it is not.
    fn update_leased<R>(&mut self, r: JobRef, f: impl FnOnce(&mut Job) -> R) -> Result<R> {
        if !self.leased(r) {
            return Err(Error::LeaseLost { job_id: r.id });
        }
        self.jobs
            .update(r.id, f)
            .ok_or(Error::LeaseLost { job_id: r.id })
    }

    /// `job_complete_{delete,keep,archive}.sql`: the jobs still running under their lease.
    pub fn job_complete(&mut self, p: JobCompleteParams) -> Vec<JobRef> {
        let finish = |j: &mut Job| {
            j.state = JobState::Completed;
            j.finished_at = Some(p.now);
            j.lease_token = None;
            j.lease_expires_at = None;
        };
        let mut done = Vec::with_capacity(p.jobs.len());
        for r in p.jobs {
            if !self.leased(r) {
                continue;
            }
            match p.retention {
                Retention::Delete => drop(self.jobs.remove(r.id)),
                Retention::Keep => drop(self.jobs.update(r.id, finish)),
                Retention::Archive => self.jobs.move_to_archive(r.id, finish),
            }
            self.ended(r.id, "completed", p.now);
            done.push(r);
        }
        done
    }

    /// `job_fail.sql`: retried (available at `retry_at`), or dead or cancelled.
    pub fn job_fail(&mut self, p: JobFailParams) -> Result<()> {
        let (mut state, run_at, finished_at) = p.target();
        let JobFailParams {
            job, now, error, ..
        } = p;
        let next = |q: &str| {
            self.queues
                .get(q)
                .is_some_and(|s| s.group_on_failure == backlog_core::GroupFailure::Next)
        };
        if let Some(j) = self.jobs.get(job.id)
            && state == JobState::Available
            && j.group.is_some()
            && next(&j.queue)
        {
            state = JobState::Waiting;
        }
        let queue = self.update_leased(job, |j| {
            j.errors.push(ErrorRecord {
                attempt: j.attempt,
                at: now,
                error,
            });
            j.state = state;
            j.run_at = run_at;
            j.finished_at = finished_at;
            j.lease_token = None;
            j.lease_expires_at = None;
            j.queue.clone()
        })?;
        if state == JobState::Available && run_at <= now {
            self.woke(&queue);
        }
        if state.is_finished() {
            self.ended(job.id, state.as_str(), now);
        }
        Ok(())
    }

    /// `job_release.sql`: back to available, the claim's attempt given back.
    pub fn job_release(&mut self, p: JobReleaseParams) -> Result<()> {
        let queue = self.update_leased(p.job, |j| {
            j.state = JobState::Available;
            j.attempt = (j.attempt - 1).max(0);
            j.run_at = p.run_at;
            j.lease_token = None;
            j.lease_expires_at = None;
            j.queue.clone()
        })?;
        if p.run_at <= p.now {
            self.woke(&queue);
        }
        Ok(())
    }

    /// `job_heartbeat.sql`: whether a cancel was requested.
    pub fn job_heartbeat(&mut self, p: JobHeartbeatParams) -> Result<bool> {
        self.update_leased(p.job, |j| {
            j.lease_expires_at = Some(p.lease_expires_at);
            j.cancel_requested_at.is_some()
        })
    }

    /// `job_progress.sql`: each value kept when not given; JSON only.
    pub fn job_progress(&mut self, p: JobProgressParams) -> Result<()> {
        if !self.leased(p.job) {
            return Err(Error::LeaseLost { job_id: p.job.id });
        }
        let kind = DbErrorKind::ConstraintViolation;
        if let Some(v) = &p.progress {
            check_json("progress", v, kind)?;
        }
        if let Some(v) = &p.result {
            check_json("result", v, kind)?;
        }
        self.update_leased(p.job, |j| {
            j.progress = p.progress.or(j.progress.take());
            j.result = p.result.or(j.result.take());
        })
    }

    /// `job_cancel_request.sql`: only a running job.
    pub fn job_cancel_request(&mut self, id: i64, now: i64) -> Result<Job> {
        let running = self
            .jobs
            .get(id)
            .is_some_and(|j| j.state == JobState::Running);
        if running {
            self.jobs.update(id, |j| j.cancel_requested_at = Some(now));
        }
        self.admin_result(id, AdminAction::Cancel, running)
    }

    /// `job_admin.sql`: the job, or why nothing changed (the archive is read, never changed).
    pub fn job_admin(&mut self, id: i64, action: AdminAction, now: i64) -> Result<Job> {
        let mut to = action.to_state();
        let Some(job) = self
            .jobs
            .get(id)
            .filter(|j| action.from_states().contains(&j.state))
        else {
            return self.admin_result(id, action, false);
        };
        let queue = job.queue.clone();
        // A job of an ordered group that becomes available waits for its group's turn; one that
        // is available already (its group's turn: a run-now) stays so.
        let was = job.state;
        if to == JobState::Available && job.state != JobState::Available {
            to = Self::available_or_waiting(job);
        }
        if holds_key(to)
            && !holds_key(job.state)
            && let Some(key) = &job.unique_key
            && let Some(holder) = self.jobs.key_holder(&queue, key)
        {
            return Err(unique_violation(&queue, key, holder));
        }
        self.jobs.update(id, |j| {
            j.state = to;
            if let Some(at) = action.run_at(now) {
                j.run_at = at;
            }
            if action.resets_attempts() {
                j.attempt = 0;
            }
            j.finished_at = action.finished_at(now);
        });
        if to == JobState::Available {
            self.woke(&queue);
        }
        if to.is_finished() && !was.is_finished() {
            self.ended(id, to.as_str(), now);
        }
        self.admin_result(id, action, true)
    }

    /// `job_delete.sql`: a job that is not running, from the table or the archive.
    pub fn job_delete(&mut self, id: i64, now: i64) -> Result<Job> {
        let job = match self.jobs.get_or_archived(id) {
            None => return Err(Error::JobNotFound { job_id: id }),
            Some(j) if j.state == JobState::Running && !j.archived => {
                return Err(j.conflict("delete"));
            }
            Some(_) => self
                .jobs
                .remove(id)
                .or_else(|| self.jobs.remove_archived(id))
                .ok_or(Error::JobNotFound { job_id: id })?,
        };
        if !job.state.is_finished() {
            self.ended(id, "deleted", now);
        }
        Ok(job)
    }

    /// [`AdminAction::outcome`] with the job as it is now.
    fn admin_result(&self, id: i64, action: AdminAction, changed: bool) -> Result<Job> {
        action.outcome(id, changed, self.jobs.get_or_archived(id).cloned())
    }

    /// `queue_redrive.sql`: the oldest dead jobs, each as an operator retry; those whose unique
    /// key another job holds stay dead.
    pub fn queue_redrive(&mut self, p: QueueRedriveParams) -> u64 {
        let ids: Vec<i64> = self
            .jobs
            .rows()
            .filter(|j| j.queue == p.queue.as_str() && j.state == JobState::Dead)
            .take(p.limit as usize)
            .map(|j| j.id)
            .collect();
        ids.into_iter()
            .filter(|&id| self.job_admin(id, AdminAction::Retry, p.now).is_ok())
            .count() as u64
    }

    /// `job_rescue.sql`: expired leases, oldest first, back to available or dead.
    pub fn job_rescue(&mut self, p: JobRescueParams) -> Vec<Rescued> {
        let now = p.now;
        let ids = self.jobs.expired(now, p.limit as usize);
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(job) = self.jobs.get(id) else {
                continue;
            };
            let max = job
                .max_attempts
                .or_else(|| self.queues.get(&job.queue).map(|q| q.max_attempts))
                .unwrap_or(QueueSettings::DEFAULT_MAX_ATTEMPTS);
            let dead = job.attempt >= max;
            let Some(queue) = self.jobs.update(id, |j| {
                let owner = j.lease_owner.as_deref().unwrap_or("?");
                j.errors.push(ErrorRecord {
                    attempt: j.attempt,
                    at: now,
                    error: format!("lease expired (worker {owner} stopped heartbeating)"),
                });
                j.state = if dead {
                    JobState::Dead
                } else {
                    JobState::Available
                };
                j.finished_at = dead.then_some(now);
                j.run_at = now;
                j.lease_token = None;
                j.lease_expires_at = None;
                j.queue.clone()
            }) else {
                continue;
            };
            if !dead {
                self.woke(&queue);
            } else {
                self.ended(id, "dead", now);
            }
            out.push(Rescued { queue, dead });
        }
        out
    }

    /// `job_prune_delete.sql` (after `job_prune_archive.sql`): finished jobs of a queue, oldest
    /// id first.
    pub fn job_prune(&mut self, p: JobPruneParams) -> u64 {
        let ids: Vec<i64> = self
            .jobs
            .rows()
            .filter(|j| {
                j.queue == p.queue.as_str()
                    && j.state == p.state
                    && j.finished_at.is_some_and(|t| t < p.finished_before)
            })
            .take(p.limit as usize)
            .map(|j| j.id)
            .collect();
        for &id in &ids {
            if p.archive {
                self.jobs.move_to_archive(id, |_| {});
            } else {
                self.jobs.remove(id);
            }
        }
        ids.len() as u64
    }

    /// `job_list.sql`: by id, after `after_id`.
    pub fn job_list(&self, p: &JobListParams) -> Vec<Job> {
        let in_state = |j: &Job| match p.state {
            None => true,
            Some(StateFilter::Stored(JobState::Available)) => {
                j.state == JobState::Available && j.run_at <= p.now
            }
            Some(StateFilter::Stored(s)) => j.state == s,
            Some(StateFilter::Scheduled) => {
                j.state == JobState::Available && j.due(p.now) == Due::Later
            }
            Some(StateFilter::Retrying) => {
                j.state == JobState::Available && j.due(p.now) == Due::Retry
            }
        };
        self.jobs
            .rows_after(p.after_id)
            .filter(|j| {
                in_state(j)
                    && p.queue.as_ref().is_none_or(|q| j.queue == q.as_str())
                    && p.kind
                        .as_ref()
                        .is_none_or(|k| j.kind.as_deref() == Some(k.as_str()))
                    && p.unique_key
                        .as_ref()
                        .is_none_or(|k| j.unique_key.as_ref() == Some(k))
            })
            .take(p.limit as usize)
            .cloned()
            .collect()
    }

    /// `job_count_pending.sql`: available (due by `due_by`, if given) and running jobs.
    pub fn job_count_pending(&self, p: &JobCountPendingParams) -> i64 {
        self.jobs
            .rows()
            .filter(|j| {
                matches!(
                    j.state,
                    JobState::Available | JobState::Running | JobState::Waiting
                ) && p.queues.iter().any(|q| q.as_str() == j.queue)
                    && kind_in(&p.kinds, j.kind.as_deref())
                    && p.due_by
                        .is_none_or(|t| j.state == JobState::Running || j.run_at <= t)
            })
            .count() as i64
    }
}

/// The error a child cancelled because its parent failed keeps, as the database's trigger
/// writes it.
fn parent_failed(attempt: i32, at: i64, parent: i64, how: &str) -> ErrorRecord {
    ErrorRecord {
        attempt,
        at,
        error: format!("cancelled: job {parent}, which it waited for, ended {how}"),
    }
}
