//! A claim loop (fetcher). Each turn it takes the slots its queue has free plus the jobs of its
//! own that finished ([`Fetcher::next_batch`], waiting a moment for the rest of a burst), then
//! completes those and claims as many in one call ([`Fetcher::claim`]) and starts what it
//! claimed ([`Fetcher::start`]). A claim that finds nothing ends a drain ([`Fetcher::drained`])
//! or waits for a wake-up, a finished job or the poll timer. How much to take and how long to
//! wait is the planner's (`plan`); the loop reaches the database through [`Claimer`] and starts
//! jobs through [`Dispatch`], which tests replace.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::DrainMode;
use super::completer::{self, Completions, Finished};
use super::heartbeat::Lease;
use super::metrics::ClaimTimes;
use super::metrics::Counters;
use super::plan::{ClaimPlan, GATHER, Idle};
use super::throttle::{LOG_EVERY, Throttled};
use crate::{
    ClaimOpts, ClaimedJob, Client, CompleteClaimed, Error, Kind, QueueName, QueueSettings, Result,
    Retention, TxClaim,
};

/// What a claim loop asks of the database (the [`Client`]'s calls).
pub(crate) trait Claimer: Completions {
    /// Completes `finished` and claims up to `limit` jobs as `opts` says, in one call where the
    /// backend can ([`Client::complete_claim`]).
    fn complete_claim(
        &self,
        finished: &[ClaimedJob],
        opts: &ClaimOpts,
        limit: u32,
    ) -> impl Future<Output = Result<CompleteClaimed>> + Send;
    /// Claims up to `limit` jobs in transaction claim mode ([`Client::claim_tx_many`]); `None`
    /// when none is due.
    fn claim_tx(
        &self,
        opts: &ClaimOpts,
        limit: u32,
    ) -> impl Future<Output = Result<Option<Box<dyn TxClaim>>>> + Send;
    /// A queue's settings (cached by the client).
    fn queue_settings(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<QueueSettings>> + Send;
    /// Jobs of the queue and kinds left to do, as a drain in `mode` counts them.
    fn pending(
        &self,
        queue: &QueueName,
        kinds: &[Kind],
        mode: DrainMode,
    ) -> impl Future<Output = Result<i64>> + Send;
}

impl Claimer for Client {
    async fn complete_claim(
        &self,
        finished: &[ClaimedJob],
        opts: &ClaimOpts,
        limit: u32,
    ) -> Result<CompleteClaimed> {
        Client::complete_claim(self, finished, &opts.clone().limit(limit)).await
    }

    async fn claim_tx(&self, opts: &ClaimOpts, limit: u32) -> Result<Option<Box<dyn TxClaim>>> {
        // The executor counts the jobs it starts ([`Dispatch::start_tx`]).
        Client::claim_tx_uncounted(self, &opts.clone().limit(limit)).await
    }

    fn queue_settings(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<QueueSettings>> + Send {
        Client::queue_settings(self, queue)
    }

    async fn pending(&self, queue: &QueueName, kinds: &[Kind], mode: DrainMode) -> Result<i64> {
        let queues = std::slice::from_ref(queue);
        match mode {
            DrainMode::All => Client::pending(self, queues, kinds).await,
            DrainMode::Due => self.pending_due(queues, kinds).await,
        }
    }
}

/// The jobs of one claim, each with the slot it holds until it ends, and how they run.
pub(crate) struct Claimed {
    pub jobs: Vec<ClaimedJob>,
    /// As many as `jobs`; a transaction claim's jobs may be more ([`Dispatch::start_tx`]).
    pub slots: Vec<OwnedSemaphorePermit>,
    /// Their lease, renewed by the heartbeater.
    pub lease: Lease,
    /// The queue's retention, for completions recorded on their own.
    pub retention: Retention,
}

/// Starting claimed jobs (`execute::Executor` runs their handlers).
pub(crate) trait Dispatch: Send + Sync + 'static {
    /// Starts the jobs; each ends in `finished`, with its slot.
    fn start(&self, claimed: Claimed, finished: &Arc<Finished>);
    /// Starts the jobs of a transaction claim (`claimed.jobs` are `claim`'s, and may be more
    /// than its slots) and ends its transaction: the jobs that ended at once completed in it,
    /// the others leased to run on, each keeping a slot. A slot whose job ended at once serves
    /// the next job; jobs left with no slot are left alone (free again at the commit).
    fn start_tx(
        &self,
        claim: Box<dyn TxClaim>,
        claimed: Claimed,
        finished: &Arc<Finished>,
    ) -> impl Future<Output = TxStarted> + Send;
}

/// How a transaction claim's jobs went ([`Dispatch::start_tx`]).
#[derive(Default)]
pub(crate) struct TxStarted {
    /// The slots no job of the claim holds any more (all of them, when its transaction did
    /// not commit), for the claim loop's next claim.
    pub slots: Vec<OwnedSemaphorePermit>,
    /// Jobs that ended in their first poll.
    pub ended: usize,
    /// Jobs that went on past it, each holding a slot.
    pub running: usize,
    /// Jobs left alone for want of a slot.
    pub left: usize,
}

/// What every claim loop of a run shares.
pub(crate) struct Pipeline<C, D> {
    /// Where jobs are claimed and completed.
    pub claimer: Arc<C>,
    /// Where claimed jobs start.
    pub dispatch: D,
    /// The owner recorded on claimed jobs.
    pub owner: String,
    /// Only these kinds are claimed (empty: any).
    pub kinds: Vec<Kind>,
    /// The lease of claimed jobs (`None`: each queue's).
    pub lease: Option<Duration>,
    /// Stop once the queues are drained.
    pub drain: Option<DrainMode>,
    /// Longest wait between polls of an empty queue.
    pub poll_max: Duration,
    /// Claim in transaction claim mode where a queue allows it (`WorkerConfig::claim_in_transaction`,
    /// on a backend with row locks).
    pub tx_claims: bool,
    /// Outcomes recorded.
    pub counters: Arc<Counters>,
    /// Claim round trips and their durations.
    pub claim_times: Arc<ClaimTimes>,
    /// Cancelled when the loops are to stop claiming.
    pub stop: CancellationToken,
}

/// A queue as one of its claim loops sees it.
pub(crate) struct Queue {
    pub name: QueueName,
    /// Its concurrency slots, shared by its loops: a job holds one from its claim until its
    /// outcome is recorded.
    pub slots: Arc<Semaphore>,
    /// This loop's finished jobs, whose completion goes with its next claim.
    pub finished: Arc<Finished>,
    /// Notified when a loop of the queue stops: a draining loop that found the queue empty
    /// while another one's jobs still ran looks again then (that one completed them first).
    pub stopped: Arc<Notify>,
    /// Notified when jobs arrive in the queue (enqueues in this process, the database's
    /// notifications).
    pub woken: Arc<Notify>,
}

/// A claim about to be made: the slots it fills, and the finished jobs it completes first (whose
/// slots are among `slots`).
#[derive(Default)]
pub(crate) struct Batch {
    slots: Vec<OwnedSemaphorePermit>,
    done: Vec<ClaimedJob>,
}

impl Batch {
    /// Takes the loop's finished jobs and as many free slots as are there, up to the plan's
    /// claim (finished jobs are all taken, up to its completions).
    fn fill(&mut self, q: &Queue, plan: &ClaimPlan) {
        q.finished
            .take_into(plan.complete_max, &mut self.done, &mut self.slots);
        while self.slots.len() < plan.max_claim
            && let Ok(p) = q.slots.clone().try_acquire_owned()
        {
            self.slots.push(p);
        }
    }
}

/// One claim loop of a queue.
pub(crate) struct Fetcher<C, D> {
    pipeline: Arc<Pipeline<C, D>>,
    queue: Queue,
    plan: ClaimPlan,
    opts: ClaimOpts,
    idle: Idle,
    /// Claims left to make under a lease before a transaction claim is tried again: set when
    /// most jobs of one outlived their first poll (they paid a lease anyway, and their
    /// completion a statement of its own), or when the queue refused one.
    leased_turns: u32,
    /// The slots of the jobs the last transaction claim completed, kept for the next claim (as
    /// finished jobs carry theirs): given back one by one, the other loops would take them for
    /// claims of a job or two.
    carried: Vec<OwnedSemaphorePermit>,
    /// Whether every job of the loop's last transaction claim ended in its first poll: the
    /// next one may then claim ahead of its free slots ([`ClaimPlan::tx_limit`]).
    ahead: bool,
    /// Claims that fail for a transient reason are retried at each poll; said once per
    /// interval (a full disk can last minutes).
    claim_warnings: std::sync::Mutex<Throttled>,
}

/// Claims made under a lease after a transaction claim whose jobs mostly outlived their first
/// poll, before the loop tries one again.
const LEASED_TURNS: u32 = 32;

/// What a claim loop's turn claimed.
enum Turn {
    /// Jobs under a lease.
    Leased(Vec<ClaimedJob>),
    /// Jobs held by an open transaction.
    Held(Box<dyn TxClaim>),
}

impl Turn {
    fn len(&self) -> usize {
        match self {
            Turn::Leased(jobs) => jobs.len(),
            Turn::Held(claim) => claim.jobs().len(),
        }
    }
}

impl<C: Claimer, D: Dispatch> Fetcher<C, D> {
    /// Says that a claim failed for a transient reason (it is tried again at the next poll).
    fn claim_failed(&self, queue: &QueueName, e: &Error) {
        let mut warnings = self.claim_warnings.lock().expect("lock");
        warnings.warn(format_args!("claim from {queue} failed, retrying: {e}"));
    }

    pub fn new(pipeline: Arc<Pipeline<C, D>>, queue: Queue, plan: ClaimPlan) -> Self {
        let mut opts = ClaimOpts::for_queue(queue.name.clone())
            .owner(pipeline.owner.clone())
            .kinds(pipeline.kinds.clone());
        if let Some(l) = pipeline.lease {
            opts = opts.lease(l);
        }
        let idle = Idle::new(pipeline.poll_max);
        Fetcher {
            pipeline,
            queue,
            plan,
            opts,
            idle,
            leased_turns: 0,
            carried: vec![],
            ahead: false,
            claim_warnings: std::sync::Mutex::new(Throttled::new(LOG_EVERY)),
        }
    }

    /// Claims and starts jobs until stopped, drained, or a claim fails for good.
    pub async fn run(mut self) -> Result<()> {
        let (wake, done) = (self.queue.woken.clone(), self.queue.finished.clone());
        let siblings = self.queue.stopped.clone();
        loop {
            let carried = std::mem::take(&mut self.carried);
            let Some(batch) = self.next_batch(carried).await else {
                return Ok(());
            };
            // Register for wake-ups (new jobs, and jobs finishing while this claim runs) before
            // looking, so none is missed in between.
            let woken = wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let finished = done.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            let sibling_stopped = siblings.notified();
            tokio::pin!(sibling_stopped);
            sibling_stopped.as_mut().enable();
            let tx = self.in_transaction().await;
            // A lease a claim writes runs from no earlier than this.
            let sent = Instant::now();
            let claimed = match tx {
                true => self.claim_in_tx(&batch).await?,
                false => Turn::Leased(self.claim(&batch).await?),
            };
            let mut slots = batch.slots;
            if claimed.len() == 0 {
                drop(slots);
                if self.drained().await? {
                    return Ok(());
                }
                let stop = &self.pipeline.stop;
                tokio::select! {
                    _ = &mut woken => self.idle.reset(),
                    _ = &mut finished => {}
                    _ = &mut sibling_stopped => {}
                    _ = tokio::time::sleep(self.idle.delay()) => self.idle.slower(),
                    _ = stop.cancelled() => return Ok(()),
                }
                continue;
            }
            self.idle.reset();
            slots.truncate(claimed.len());
            match claimed {
                Turn::Leased(jobs) => self.start(jobs, slots, sent).await,
                Turn::Held(claim) => self.start_tx(claim, slots, sent).await,
            }
        }
    }

    /// Whether this turn claims in transaction claim mode: the run does, the loop has not
    /// turned to leases for a while, and the queue has no limit a claim must count against.
    async fn in_transaction(&mut self) -> bool {
        let p = &*self.pipeline;
        if !p.tx_claims {
            return false;
        }
        if self.leased_turns > 0 {
            self.leased_turns -= 1;
            return false;
        }
        match p.claimer.queue_settings(&self.queue.name).await {
            Ok(s) => {
                s.global_concurrency.is_none()
                    && s.rate_limit.is_none()
                    && s.group_rate_limit.is_none()
            }
            Err(_) => false,
        }
    }

    /// A transaction claim: the batch's finished jobs (which ran under a lease) completed on
    /// their own, then up to the plan's claim locked. A claim that fails for a transient reason
    /// claims nothing (the loop tries again); one the queue refuses sends the loop to leases.
    async fn claim_in_tx(&mut self, batch: &Batch) -> Result<Turn> {
        let p = &*self.pipeline;
        completer::complete_alone(&*p.claimer, &batch.done, &p.counters).await;
        let limit = self.plan.tx_limit(batch.slots.len(), self.ahead);
        let started = std::time::Instant::now();
        let result = p.claimer.claim_tx(&self.opts, limit).await;
        p.claim_times.record(started.elapsed());
        let queue = &self.queue.name;
        match result {
            Ok(Some(claim)) => Ok(Turn::Held(claim)),
            Ok(None) => Ok(Turn::Leased(vec![])),
            Err(e) if e.is_transient() => {
                self.claim_failed(queue, &e);
                Ok(Turn::Leased(vec![]))
            }
            // A limit set on the queue since its settings were read.
            Err(Error::Unsupported(why)) => {
                tracing::debug!("claiming from {queue} under a lease: {why}");
                self.leased_turns = LEASED_TURNS;
                Ok(Turn::Leased(vec![]))
            }
            Err(e) => Err(e),
        }
    }

    /// Waits for a free slot or a finished job (whose slot comes with it), takes what there is,
    /// and waits a moment for the rest of a burst; `None` once stopped.
    /// `carried`: slots this loop kept from its last claim, taken first.
    async fn next_batch(&self, mut carried: Vec<OwnedSemaphorePermit>) -> Option<Batch> {
        let q = &self.queue;
        loop {
            // Checked on every turn, not only while waiting: on a busy queue whose handlers end
            // in their first poll, slots come back before the next claim and the loop never
            // waits. Finished jobs not yet taken are completed by the flushers once every loop
            // is done.
            if self.pipeline.stop.is_cancelled() {
                return None;
            }
            let mut batch = Batch::default();
            batch.slots.append(&mut carried);
            let finished = q.finished.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            batch.fill(q, &self.plan);
            if batch.slots.is_empty() {
                tokio::select! {
                    p = q.slots.clone().acquire_owned() => {
                        batch.slots.push(p.expect("semaphore open"));
                    }
                    _ = &mut finished => {}
                    _ = self.pipeline.stop.cancelled() => return None,
                }
                batch.fill(q, &self.plan);
                if batch.slots.is_empty() {
                    continue; // the other loop took them
                }
            }
            if self.plan.room_for_more(batch.slots.len()) && q.finished.burst_running(&batch.done) {
                self.gather(&mut batch).await;
            }
            return Some(batch);
        }
    }

    /// Jobs end in bursts (a batch claimed together finishes together). While jobs of the
    /// claims the batch's finished jobs came from still run, waits up to [`GATHER`] for the
    /// rest of the burst, so that one statement completes them all and claims as many, rather
    /// than a handful now; jobs of other claims, ending later, are not waited for.
    async fn gather(&self, batch: &mut Batch) {
        let q = &self.queue;
        let gather = tokio::time::sleep(GATHER);
        tokio::pin!(gather);
        loop {
            let finished = q.finished.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            if !q.finished.burst_running(&batch.done)
                || self.plan.full(batch.slots.len(), q.finished.waiting())
            {
                break;
            }
            tokio::select! {
                _ = &mut finished => {}
                _ = &mut gather => break,
            }
        }
        batch.fill(q, &self.plan);
    }

    /// Completes the batch's finished jobs and claims as many jobs as it has slots for, up to
    /// the plan's claim. A claim that fails for a transient reason claims nothing (the loop
    /// tries again); if nothing was committed, the finished jobs are completed on their own.
    async fn claim(&self, batch: &Batch) -> Result<Vec<ClaimedJob>> {
        let p = &*self.pipeline;
        let limit = self.plan.limit(batch.slots.len());
        let started = std::time::Instant::now();
        let result = p
            .claimer
            .complete_claim(&batch.done, &self.opts, limit)
            .await;
        p.claim_times.record(started.elapsed());
        let queue = &self.queue.name;
        match result {
            Ok(r) => {
                completer::record(&p.counters, &batch.done, &r.completed);
                match r.claimed {
                    Ok(c) => Ok(c),
                    Err(e) if e.is_transient() => {
                        self.claim_failed(queue, &e);
                        Ok(vec![])
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => {
                // Nothing was committed: the finished jobs are completed on their own.
                completer::complete_alone(&*p.claimer, &batch.done, &p.counters).await;
                if !e.is_transient() {
                    return Err(e);
                }
                self.claim_failed(queue, &e);
                Ok(vec![])
            }
        }
    }

    /// True when a draining loop may stop: nothing of its own in flight and nothing left that
    /// it may take (jobs of kinds this worker does not claim wait for another worker). A paused
    /// queue has nothing it may take: its drain ends, leaving the jobs for after the resume,
    /// and says so. A look that fails for a transient reason (the database restarting) is no
    /// answer: the loop goes on and looks again, as after a failed claim.
    async fn drained(&self) -> Result<bool> {
        match self.drained_now().await {
            Err(e) if e.is_transient() => {
                let queue = &self.queue.name;
                tracing::warn!("drain check of {queue} failed, retrying: {e}");
                Ok(false)
            }
            other => other,
        }
    }

    async fn drained_now(&self) -> Result<bool> {
        let p = &*self.pipeline;
        let Some(mode) = p.drain else {
            return Ok(false);
        };
        if self
            .plan
            .own_jobs_running(self.queue.slots.available_permits())
        {
            return Ok(false);
        }
        let pending = p.claimer.pending(&self.queue.name, &p.kinds, mode).await?;
        if pending == 0 {
            return Ok(true);
        }
        let paused = p.claimer.queue_settings(&self.queue.name).await?.paused;
        if paused {
            tracing::warn!(
                queue = %self.queue.name,
                pending,
                "drain ends: the queue is paused, its jobs wait for a resume"
            );
        }
        Ok(paused)
    }

    /// Starts the claimed jobs, each with one of `slots`, under the queue's current lease and
    /// retention.
    async fn start(
        &self,
        claimed: Vec<ClaimedJob>,
        slots: Vec<OwnedSemaphorePermit>,
        sent: Instant,
    ) {
        let claimed = self.running(claimed, slots, sent).await;
        self.pipeline.dispatch.start(claimed, &self.queue.finished);
    }

    /// Starts the jobs of a transaction claim with `slots` and ends its transaction. When most
    /// of them outlived their first poll, the next claims go under a lease; when all of them
    /// ended there, the next one may claim ahead of its free slots.
    async fn start_tx(
        &mut self,
        mut claim: Box<dyn TxClaim>,
        slots: Vec<OwnedSemaphorePermit>,
        sent: Instant,
    ) {
        let jobs = claim.take_jobs();
        let claimed = self.running(jobs, slots, sent).await;
        let dispatch = &self.pipeline.dispatch;
        let started = dispatch
            .start_tx(claim, claimed, &self.queue.finished)
            .await;
        self.carried = started.slots;
        self.ahead = started.running == 0 && started.left == 0;
        if started.running > started.ended {
            self.leased_turns = LEASED_TURNS;
        }
    }

    /// Counts claimed jobs as running and gives them, with their slots, the queue's current
    /// lease (written by a claim sent at `sent`) and retention.
    async fn running(
        &self,
        jobs: Vec<ClaimedJob>,
        slots: Vec<OwnedSemaphorePermit>,
        sent: Instant,
    ) -> Claimed {
        let p = &*self.pipeline;
        let q = &self.queue;
        // Read here, never while a handler holds a job transaction: on SQLite that transaction
        // holds the write lock, and a settings read queued behind a blocked writer would wait
        // on it.
        let settings = p
            .claimer
            .queue_settings(&q.name)
            .await
            .unwrap_or_else(|_| QueueSettings::defaults(q.name.clone()));
        q.finished.started(&jobs);
        Claimed {
            jobs,
            slots,
            lease: Lease {
                span: p.lease.unwrap_or(settings.lease),
                from: sent,
            },
            retention: settings.retention,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use tokio::time::Instant;

    use super::*;
    use crate::worker::WorkerConfig;
    use crate::worker::fakes::{self, job};
    use crate::{Error, JobRef};

    /// How the scripted claimer answers a claim.
    enum Answer {
        /// Completes the finished jobs and claims this many new jobs (at most the limit).
        Claim(usize),
        /// Completes the finished jobs; then the claim fails.
        ClaimFails(Error),
        /// Fails whole: nothing is committed.
        Fails(Error),
    }

    /// One claim as the claimer saw it: the finished jobs it carried, its limit, and when.
    #[derive(Debug, Clone, PartialEq)]
    struct Call {
        done: Vec<i64>,
        limit: u32,
        at: Instant,
    }

    /// Answers claims as scripted (then finds nothing), with jobs numbered from 1 and each
    /// claim's number as their lease token; counts `pending` jobs; records everything.
    struct ScriptedClaimer {
        answers: Mutex<VecDeque<Answer>>,
        calls: Mutex<Vec<Call>>,
        next_id: Mutex<i64>,
        completed_alone: Mutex<Vec<i64>>,
        pending: Mutex<i64>,
        /// How many `pending` calls fail (transiently) before it answers.
        pending_fails: Mutex<usize>,
        pending_asked: Mutex<Vec<(Vec<Kind>, DrainMode)>>,
        /// The queue's settings; `None` fails the read.
        settings: Option<QueueSettings>,
    }

    impl ScriptedClaimer {
        fn new(answers: impl IntoIterator<Item = Answer>) -> Self {
            ScriptedClaimer {
                answers: Mutex::new(answers.into_iter().collect()),
                calls: Mutex::default(),
                next_id: Mutex::new(1),
                completed_alone: Mutex::default(),
                pending: Mutex::default(),
                pending_fails: Mutex::default(),
                pending_asked: Mutex::default(),
                settings: Some(QueueSettings::defaults(QueueName::new("q").unwrap())),
            }
        }

        fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }

        /// The finished jobs and limit of each claim.
        fn claims(&self) -> Vec<(Vec<i64>, u32)> {
            self.calls()
                .into_iter()
                .map(|c| (c.done, c.limit))
                .collect()
        }
    }

    impl Completions for ScriptedClaimer {
        fn now(&self) -> i64 {
            fakes::T0
        }

        async fn complete_many(&self, jobs: &[ClaimedJob]) -> Result<Vec<JobRef>> {
            let mut alone = self.completed_alone.lock().unwrap();
            alone.extend(jobs.iter().map(|j| j.id));
            Ok(jobs.iter().map(ClaimedJob::job_ref).collect())
        }
    }

    impl Claimer for ScriptedClaimer {
        async fn complete_claim(
            &self,
            finished: &[ClaimedJob],
            _: &ClaimOpts,
            limit: u32,
        ) -> Result<CompleteClaimed> {
            let done: Vec<_> = finished.iter().map(|j| j.id).collect();
            let mut calls = self.calls.lock().unwrap();
            calls.push(Call {
                done,
                limit,
                at: Instant::now(),
            });
            let token = calls.len() as i64;
            let completed = finished.iter().map(ClaimedJob::job_ref).collect();
            let claimed = match self.answers.lock().unwrap().pop_front() {
                None => Ok(vec![]),
                Some(Answer::Claim(n)) => {
                    let mut next = self.next_id.lock().unwrap();
                    let n = n.min(limit as usize) as i64;
                    let jobs = (*next..*next + n).map(|id| job(id, token)).collect();
                    *next += n;
                    Ok(jobs)
                }
                Some(Answer::ClaimFails(e)) => Err(e),
                Some(Answer::Fails(e)) => return Err(e),
            };
            Ok(CompleteClaimed {
                completed,
                claimed,
                promoted: 0,
            })
        }

        async fn claim_tx(&self, _: &ClaimOpts, _: u32) -> Result<Option<Box<dyn TxClaim>>> {
            Err(Error::Unsupported(
                "the scripted claimer makes no transaction claims",
            ))
        }

        async fn queue_settings(&self, _: &QueueName) -> Result<QueueSettings> {
            self.settings.clone().ok_or_else(fakes::fatal)
        }

        async fn pending(&self, _: &QueueName, kinds: &[Kind], mode: DrainMode) -> Result<i64> {
            self.pending_asked
                .lock()
                .unwrap()
                .push((kinds.to_vec(), mode));
            let mut fails = self.pending_fails.lock().unwrap();
            if *fails > 0 {
                *fails -= 1;
                return Err(fakes::transient());
            }
            Ok(*self.pending.lock().unwrap())
        }
    }

    /// A claimed job held by the dispatcher: the job, its slot and its loop's finished list.
    type Held = (ClaimedJob, OwnedSemaphorePermit, Arc<Finished>);

    /// Starts no handler: each job either ends at once, completed (as a no-op handler does in
    /// its first poll), or is held until the test ends it.
    #[derive(Default)]
    struct FakeDispatch {
        at_once: bool,
        held: Mutex<Vec<Held>>,
        /// The lease and retention each claim's jobs started with.
        started: Mutex<Vec<(Duration, Retention)>>,
    }

    impl FakeDispatch {
        /// Ends held job `id`, completed.
        fn end(&self, id: i64) {
            let mut held = self.held.lock().unwrap();
            let i = held.iter().position(|h| h.0.id == id).expect("held");
            let (job, slot, finished) = held.remove(i);
            finished.ended(job.lease_token, Some(job), slot);
        }
    }

    impl Dispatch for FakeDispatch {
        fn start(&self, claimed: Claimed, finished: &Arc<Finished>) {
            let started = (claimed.lease.span, claimed.retention);
            self.started.lock().unwrap().push(started);
            for (job, slot) in claimed.jobs.into_iter().zip(claimed.slots) {
                match self.at_once {
                    true => finished.ended(job.lease_token, Some(job), slot),
                    false => self
                        .held
                        .lock()
                        .unwrap()
                        .push((job, slot, finished.clone())),
                }
            }
        }

        async fn start_tx(&self, _: Box<dyn TxClaim>, _: Claimed, _: &Arc<Finished>) -> TxStarted {
            unreachable!("the scripted claimer makes no transaction claims")
        }
    }

    /// A claim loop of a queue of `concurrency` (its only loop), and what the test looks at.
    struct Loop {
        fetcher: Fetcher<ScriptedClaimer, FakeDispatch>,
        pipeline: Arc<Pipeline<ScriptedClaimer, FakeDispatch>>,
        slots: Arc<Semaphore>,
        woken: Arc<Notify>,
    }

    fn claim_loop(
        concurrency: usize,
        claimer: ScriptedClaimer,
        dispatch: FakeDispatch,
        config: impl FnOnce(&mut WorkerConfig),
    ) -> Loop {
        let mut c = WorkerConfig {
            fetchers: Some(1),
            ..WorkerConfig::default()
        };
        config(&mut c);
        let pipeline = Arc::new(Pipeline {
            claimer: Arc::new(claimer),
            dispatch,
            owner: "test".into(),
            kinds: vec![Kind::new("k").unwrap()],
            lease: c.lease,
            drain: c.drain,
            poll_max: c.poll_max,
            tx_claims: false,
            counters: Arc::default(),
            claim_times: Arc::default(),
            stop: CancellationToken::new(),
        });
        let slots = Arc::new(Semaphore::new(concurrency));
        let woken = Arc::new(Notify::new());
        let queue = Queue {
            name: QueueName::new("q").unwrap(),
            slots: slots.clone(),
            finished: Arc::default(),
            stopped: Arc::default(),
            woken: woken.clone(),
        };
        let plan = ClaimPlan::new(concurrency, &c, crate::worker::plan::Claimers::Many);
        Loop {
            fetcher: Fetcher::new(pipeline.clone(), queue, plan),
            pipeline,
            slots,
            woken,
        }
    }

    fn held() -> FakeDispatch {
        FakeDispatch::default()
    }

    fn at_once() -> FakeDispatch {
        FakeDispatch {
            at_once: true,
            ..Default::default()
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_asks_for_the_free_slots_up_to_its_batch() {
        let answers = [Answer::Claim(3)];
        let l = claim_loop(4, ScriptedClaimer::new(answers), held(), |c| {
            c.claim_batch = Some(3)
        });
        let task = tokio::spawn(l.fetcher.run());
        tokio::time::sleep(ms(100)).await;
        let claims = l.pipeline.claimer.claims();
        assert_eq!(claims[0], (vec![], 3));
        assert!(claims.len() > 2, "an empty queue is polled");
        assert!(claims[1..].iter().all(|c| *c == (vec![], 1)), "{claims:?}");
        assert_eq!(
            l.slots.available_permits(),
            1,
            "three jobs hold their slots"
        );
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn finished_jobs_go_back_with_the_next_claim_once_their_burst_is_in() {
        let l = claim_loop(4, ScriptedClaimer::new([Answer::Claim(4)]), held(), |_| {});
        let claimer = l.pipeline.claimer.clone();
        let task = tokio::spawn(l.fetcher.run());
        tokio::time::sleep(ms(1)).await;
        assert_eq!(claimer.claims(), [(vec![], 4)]);
        assert_eq!(l.slots.available_permits(), 0);
        // Two jobs of the claim end 1 ms apart; the loop waits for the rest of the burst for
        // 2 ms, then carries both, and claims as many.
        let ended = Instant::now();
        l.pipeline.dispatch.end(1);
        tokio::time::sleep(ms(1)).await;
        l.pipeline.dispatch.end(2);
        tokio::time::sleep(ms(5)).await;
        let second = claimer.calls()[1].clone();
        assert_eq!((second.done, second.limit), (vec![1, 2], 2));
        assert_eq!(second.at - ended, GATHER);
        // The last two end together: nothing more of theirs runs, so no wait at all.
        let ended = Instant::now();
        l.pipeline.dispatch.end(3);
        l.pipeline.dispatch.end(4);
        tokio::time::sleep(ms(1)).await;
        let carried: Vec<_> = claimer
            .calls()
            .into_iter()
            .filter(|c| !c.done.is_empty())
            .collect();
        assert_eq!(carried.len(), 2);
        assert_eq!(
            (carried[1].done.clone(), carried[1].limit, carried[1].at),
            (vec![3, 4], 4, ended)
        );
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_ends_when_nothing_it_may_take_is_pending() {
        let l = claim_loop(
            4,
            ScriptedClaimer::new([Answer::Claim(2)]),
            at_once(),
            |c| c.drain = Some(DrainMode::Due),
        );
        l.fetcher.run().await.unwrap();
        let claimer = &l.pipeline.claimer;
        assert_eq!(claimer.claims(), [(vec![], 4), (vec![1, 2], 4)]);
        let k = Kind::new("k").unwrap();
        assert_eq!(
            *claimer.pending_asked.lock().unwrap(),
            [(vec![k], DrainMode::Due)]
        );
        assert_eq!(
            l.pipeline
                .counters
                .completed
                .load(std::sync::atomic::Ordering::Relaxed),
            2
        );
        assert_eq!(l.slots.available_permits(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_waits_for_its_own_jobs_and_for_jobs_it_may_take() {
        let claimer = ScriptedClaimer::new([Answer::Claim(1)]);
        *claimer.pending.lock().unwrap() = 3; // nothing to claim now, jobs pending (not due)
        let l = claim_loop(2, claimer, held(), |c| c.drain = Some(DrainMode::All));
        let claimer = l.pipeline.claimer.clone();
        let task = tokio::spawn(l.fetcher.run());
        tokio::time::sleep(ms(500)).await;
        assert!(!task.is_finished());
        assert!(
            claimer.pending_asked.lock().unwrap().is_empty(),
            "job 1 runs"
        );
        l.pipeline.dispatch.end(1);
        tokio::time::sleep(ms(500)).await;
        assert!(!task.is_finished(), "3 jobs are pending");
        let asked = claimer.pending_asked.lock().unwrap().clone();
        assert!(!asked.is_empty() && asked.iter().all(|a| a.1 == DrainMode::All));
        *claimer.pending.lock().unwrap() = 0;
        tokio::time::sleep(ms(2000)).await;
        assert!(task.is_finished(), "ends at the next poll");
        task.await.unwrap().unwrap();
    }

    /// Found by the restart test (tests/processes/restarts.rs): with the database down, the
    /// drain's look at pending jobs failed and ended the worker with the error.
    #[tokio::test(start_paused = true)]
    async fn a_drain_goes_on_when_its_look_at_pending_jobs_fails_for_now() {
        let claimer = ScriptedClaimer::new([Answer::ClaimFails(fakes::transient())]);
        *claimer.pending_fails.lock().unwrap() = 2;
        let l = claim_loop(2, claimer, held(), |c| c.drain = Some(DrainMode::All));
        let ended = tokio::time::timeout(ms(5000), l.fetcher.run()).await;
        ended.expect("the drain ends").unwrap();
        let claimer = &l.pipeline.claimer;
        assert_eq!(claimer.pending_asked.lock().unwrap().len(), 3);
        assert_eq!(
            claimer.calls().len(),
            3,
            "claims again after each failed look"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_of_a_paused_queue_ends_and_leaves_its_jobs() {
        let mut claimer = ScriptedClaimer::new([]);
        *claimer.pending.lock().unwrap() = 3;
        if let Some(s) = claimer.settings.as_mut() {
            s.paused = true;
        }
        let l = claim_loop(2, claimer, held(), |c| c.drain = Some(DrainMode::All));
        let ended = tokio::time::timeout(ms(5000), l.fetcher.run()).await;
        ended.expect("the drain ends").unwrap();
        assert_eq!(l.pipeline.claimer.pending_asked.lock().unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_queue_is_polled_ever_more_slowly_until_a_wake_up() {
        let l = claim_loop(4, ScriptedClaimer::new([]), held(), |c| {
            c.poll_max = Duration::from_secs(1)
        });
        let claimer = l.pipeline.claimer.clone();
        let task = tokio::spawn(l.fetcher.run());
        // Polls at 0, 10, 30, 70, 150, 310 and 630 ms (each wait up to a quarter longer); the
        // next one comes after 1,270 ms.
        tokio::time::sleep(ms(1000)).await;
        assert_eq!(claimer.calls().len(), 7);
        l.woken.notify_waiters();
        tokio::time::sleep(ms(1)).await;
        assert_eq!(claimer.calls().len(), 8, "a wake-up polls at once");
        tokio::time::sleep(ms(15)).await;
        assert_eq!(claimer.calls().len(), 9, "and quickly again");
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_claim_is_retried_unless_it_cannot_succeed() {
        let answers = [
            Answer::Claim(2),
            Answer::Fails(fakes::transient()),
            Answer::Claim(1),
            Answer::ClaimFails(fakes::transient()),
            Answer::Fails(fakes::fatal()),
        ];
        let l = claim_loop(4, ScriptedClaimer::new(answers), at_once(), |_| {});
        let e = l.fetcher.run().await.unwrap_err();
        assert!(!e.is_transient(), "{e}");
        let claimer = &l.pipeline.claimer;
        let claims: Vec<_> = claimer.claims().into_iter().map(|c| c.0).collect();
        assert_eq!(claims, [vec![], vec![1, 2], vec![], vec![3], vec![]]);
        // Jobs 1 and 2 went with a claim that failed whole: they were completed on their own.
        assert_eq!(*claimer.completed_alone.lock().unwrap(), [1, 2]);
        let completed = &l.pipeline.counters.completed;
        assert_eq!(completed.load(std::sync::atomic::Ordering::Relaxed), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_ends_the_loop_whether_it_waits_for_slots_or_for_jobs() {
        let l = claim_loop(2, ScriptedClaimer::new([Answer::Claim(2)]), held(), |_| {});
        let (stop, task) = (l.pipeline.stop.clone(), tokio::spawn(l.fetcher.run()));
        tokio::time::sleep(ms(100)).await;
        assert_eq!(l.pipeline.claimer.calls().len(), 1, "waits for a slot");
        stop.cancel();
        tokio::time::sleep(ms(1)).await;
        assert!(task.is_finished());
        task.await.unwrap().unwrap();
        let idle = claim_loop(2, ScriptedClaimer::new([]), held(), |_| {});
        let (stop, task) = (idle.pipeline.stop.clone(), tokio::spawn(idle.fetcher.run()));
        tokio::time::sleep(ms(100)).await;
        stop.cancel();
        tokio::time::sleep(ms(1)).await;
        assert!(task.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn claimed_jobs_start_with_the_queues_lease_unless_the_worker_sets_one() {
        let mut claimer = ScriptedClaimer::new([Answer::Claim(1)]);
        let settings = claimer.settings.as_mut().unwrap();
        (settings.lease, settings.retention) = (Duration::from_secs(45), Retention::Archive);
        let drain = |c: &mut WorkerConfig| c.drain = Some(DrainMode::All);
        let queues = claim_loop(2, claimer, at_once(), drain);
        queues.fetcher.run().await.unwrap();
        let started = queues.pipeline.dispatch.started.lock().unwrap().clone();
        assert_eq!(started, [(Duration::from_secs(45), Retention::Archive)]);

        let mut unreadable = ScriptedClaimer::new([Answer::Claim(1)]);
        unreadable.settings = None;
        let own = claim_loop(2, unreadable, at_once(), |c| {
            drain(c);
            c.lease = Some(Duration::from_secs(5));
        });
        own.fetcher.run().await.unwrap();
        let started = own.pipeline.dispatch.started.lock().unwrap().clone();
        let defaults = QueueSettings::defaults(QueueName::new("q").unwrap());
        assert_eq!(started, [(Duration::from_secs(5), defaults.retention)]);
    }
}
