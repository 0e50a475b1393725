//! The claim planner: how many jobs a claim loop asks for, how long it waits for the rest of a
//! burst, how slowly it polls an empty queue, and whether a drain may end. Pure and
//! synchronous: the claim loop (`fetch`) asks it at each turn.

use std::time::Duration;

use backlog_core::Capabilities;

use super::{
    DEFAULT_CLAIM_MAX, FEW_CLAIMERS_CLAIM_MAX, MANY_CLAIMERS_CLAIM_MAX, MAX_AUTO_FETCHERS,
    WorkerConfig,
};

/// Longest wait for the rest of a burst (the jobs of the same claims) before the next claim.
pub(crate) const GATHER: Duration = Duration::from_millis(2);

/// Shortest wait between polls of an empty queue; doubles up to `poll_max`.
pub(crate) const MIN_IDLE: Duration = Duration::from_millis(10);

/// How a backend's claims of one queue meet, from its [`Capabilities`]: what sizes the loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claimers {
    /// Side by side (PostgreSQL): one loop per [`MANY_CLAIMERS_CLAIM_MAX`] slots.
    Many,
    /// Few and large (MySQL, MariaDB): two loops, each claiming its half of the slots up to
    /// [`FEW_CLAIMERS_CLAIM_MAX`].
    Few,
    /// One at a time (SQLite): two loops, each claiming every free slot.
    OneWriter,
}

impl Claimers {
    pub fn of(caps: &Capabilities) -> Self {
        match (caps.single_writer, caps.few_claimers) {
            (true, _) => Claimers::OneWriter,
            (false, true) => Claimers::Few,
            (false, false) => Claimers::Many,
        }
    }
}

/// The limits of one claim loop, from its queue's concurrency and the worker's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClaimPlan {
    /// The queue's concurrency: its slots, shared by its claim loops.
    pub concurrency: usize,
    /// Claim loops of the queue.
    pub fetchers: usize,
    /// Most jobs one claim takes.
    pub max_claim: usize,
    /// Most jobs a transaction claim takes once its loop's last one ended all its jobs in
    /// their first poll, whatever the free slots (see [`ClaimPlan::tx_limit`]); 0 on a backend
    /// with one writer, which makes no transaction claims.
    pub ahead: usize,
    /// Most finished jobs one claim completes.
    pub complete_max: usize,
}

impl ClaimPlan {
    /// The plan of a queue of `concurrency`: `fetchers` loops (at most one per slot), each
    /// claiming `claim_batch` jobs at most, by default its share of the slots up to
    /// [`MANY_CLAIMERS_CLAIM_MAX`], and never more than the queue's concurrency.
    ///
    /// On a backend with one writer (`Claimers::OneWriter`: SQLite) claims run one at a time
    /// whatever the number of loops, and each costs a commit: by default two loops (one claim
    /// running while the other's jobs start), each taking every free slot up to
    /// [`DEFAULT_CLAIM_MAX`]. At concurrency 100 that is claims of up to 100 instead of 50,
    /// which drained 1.25× as fast on SQLite (docs/bench-journal/2026-11-26-sqlite-one-writer.md).
    /// Where claimers slow each other down (`Claimers::Few`: MySQL, MariaDB), two loops each
    /// claim their half of the slots, up to [`FEW_CLAIMERS_CLAIM_MAX`].
    pub fn new(concurrency: usize, config: &WorkerConfig, claimers: Claimers) -> Self {
        let most = concurrency.max(1);
        let auto = match claimers {
            Claimers::OneWriter | Claimers::Few => 2,
            Claimers::Many => concurrency
                .div_ceil(MANY_CLAIMERS_CLAIM_MAX)
                .clamp(2, MAX_AUTO_FETCHERS),
        };
        let fetchers = config.fetchers.unwrap_or(auto).clamp(1, most);
        let (share, cap) = match claimers {
            Claimers::OneWriter => (concurrency, DEFAULT_CLAIM_MAX),
            Claimers::Few => (concurrency.div_ceil(fetchers), FEW_CLAIMERS_CLAIM_MAX),
            Claimers::Many => (concurrency.div_ceil(fetchers), MANY_CLAIMERS_CLAIM_MAX),
        };
        let max_claim = config.claim_batch.unwrap_or(share.min(cap)).clamp(1, most);
        let ahead = match claimers {
            Claimers::OneWriter => 0,
            _ => config.claim_batch.unwrap_or(cap).max(max_claim),
        };
        ClaimPlan {
            concurrency,
            fetchers,
            max_claim,
            ahead,
            complete_max: config.complete_batch.max(1),
        }
    }

    /// How many jobs a claim holding `slots` asks for.
    pub fn limit(&self, slots: usize) -> u32 {
        slots.min(self.max_claim) as u32
    }

    /// How many jobs a transaction claim holding `slots` asks for. When the loop's last one
    /// ended every job in its first poll (`ahead`), up to [`ClaimPlan::ahead`] whatever the
    /// free slots: such jobs hold a slot only while the claim loop polls them, so one slot
    /// serves job after job, and a claim's cost is mostly its round trips and its commit. Jobs
    /// a claim holds no slot for are left alone at its commit (written nothing, free again at
    /// once). Otherwise, as [`ClaimPlan::limit`].
    pub fn tx_limit(&self, slots: usize, ahead: bool) -> u32 {
        match ahead && self.ahead > 0 {
            true => self.ahead as u32,
            false => self.limit(slots),
        }
    }

    /// Whether a claim holding `slots` has room for more (worth waiting for the rest of a burst).
    pub fn room_for_more(&self, slots: usize) -> bool {
        slots < self.max_claim
    }

    /// Whether `slots` and the finished jobs `waiting` fill a claim (no need to wait longer).
    pub fn full(&self, slots: usize, waiting: usize) -> bool {
        slots + waiting >= self.max_claim
    }

    /// Whether jobs this worker claimed from the queue are still running (or finished and not
    /// yet recorded), with `free` of its slots free: a drain does not end while they are.
    pub fn own_jobs_running(&self, free: usize) -> bool {
        free < self.concurrency
    }
}

/// The wait between polls of a queue that had nothing to claim: [`MIN_IDLE`] at first, twice as
/// long after each wait that nothing ended early, up to `poll_max`, with up to a quarter more at
/// random so that idle workers spread out. A wake-up or a claim that finds jobs starts it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Idle {
    wait: Duration,
    max: Duration,
}

impl Idle {
    pub fn new(poll_max: Duration) -> Self {
        Idle {
            wait: MIN_IDLE,
            max: poll_max.max(MIN_IDLE),
        }
    }

    /// The next wait: the current one plus its jitter.
    pub fn delay(&self) -> Duration {
        let quarter = self.wait.as_micros() as u64 / 4;
        self.wait + Duration::from_micros(rand::random_range(0..=quarter))
    }

    /// The wait ran out with nothing new: poll more slowly.
    pub fn slower(&mut self) {
        self.wait = (self.wait * 2).min(self.max);
    }

    /// Jobs arrived: poll quickly again.
    pub fn reset(&mut self) {
        self.wait = MIN_IDLE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(concurrency: usize, f: impl FnOnce(&mut WorkerConfig)) -> ClaimPlan {
        plan_for(Claimers::Many, concurrency, f)
    }

    fn plan_for(
        claimers: Claimers,
        concurrency: usize,
        f: impl FnOnce(&mut WorkerConfig),
    ) -> ClaimPlan {
        let mut config = WorkerConfig::default();
        f(&mut config);
        ClaimPlan::new(concurrency, &config, claimers)
    }

    /// Loops and claim size of a plan for `claimers`.
    fn sizes(claimers: Claimers, concurrency: usize, f: fn(&mut WorkerConfig)) -> (usize, usize) {
        let p = plan_for(claimers, concurrency, f);
        (p.fetchers, p.max_claim)
    }

    #[test]
    fn a_claim_takes_its_loops_share_of_the_slots_up_to_the_default_max() {
        let p = plan(10, |_| {});
        assert_eq!((p.fetchers, p.max_claim, p.complete_max), (2, 5, 500));
        assert_eq!(plan(11, |_| {}).max_claim, 6);
        assert_eq!(plan(1000, |_| {}).max_claim, MANY_CLAIMERS_CLAIM_MAX);
        let single = plan(1, |_| {});
        assert_eq!(
            (single.fetchers, single.max_claim),
            (1, 1),
            "one loop per slot at most"
        );
        let four = plan(6, |c| c.fetchers = Some(4));
        assert_eq!((four.fetchers, four.max_claim), (4, 2));
        assert_eq!(plan(8, |c| c.fetchers = Some(0)).fetchers, 1);
    }

    #[test]
    fn by_default_enough_loops_for_their_claims_to_fill_the_concurrency() {
        let loops = |concurrency| plan(concurrency, |_| {}).fetchers;
        assert_eq!(loops(100), 2);
        assert_eq!(loops(500), 2);
        assert_eq!(loops(501), 3);
        assert_eq!(loops(2000), 8);
        assert_eq!(loops(5000), MAX_AUTO_FETCHERS);
        assert_eq!(
            plan(100, |_| {}).max_claim,
            50,
            "two claims of 50 fill 100 slots"
        );
        let p = plan(500, |_| {});
        assert_eq!(
            p.max_claim, MANY_CLAIMERS_CLAIM_MAX,
            "two claims of 250 fill 500 slots"
        );
        assert_eq!(plan(2000, |_| {}).max_claim, MANY_CLAIMERS_CLAIM_MAX);
    }

    #[test]
    fn one_writer_gets_two_loops_that_each_claim_every_free_slot() {
        let one = |concurrency, f| sizes(Claimers::OneWriter, concurrency, f);
        assert_eq!(one(100, |_| {}), (2, 100));
        assert_eq!(one(10, |_| {}), (2, 10));
        assert_eq!(one(1000, |_| {}), (2, DEFAULT_CLAIM_MAX));
        assert_eq!(one(1, |_| {}), (1, 1));
        assert_eq!(one(100, |c| c.fetchers = Some(4)), (4, 100));
        assert_eq!(one(100, |c| c.claim_batch = Some(30)), (2, 30));
    }

    #[test]
    fn few_claimers_get_two_loops_that_each_claim_half_the_slots() {
        let few = |concurrency, f| sizes(Claimers::Few, concurrency, f);
        assert_eq!(few(100, |_| {}), (2, 50));
        assert_eq!(few(500, |_| {}), (2, 250));
        assert_eq!(few(1000, |_| {}), (2, FEW_CLAIMERS_CLAIM_MAX));
        assert_eq!(few(5000, |_| {}), (2, FEW_CLAIMERS_CLAIM_MAX));
        assert_eq!(few(1, |_| {}), (1, 1));
        assert_eq!(few(500, |c| c.fetchers = Some(5)), (5, 100));
        assert_eq!(few(500, |c| c.claim_batch = Some(30)), (2, 30));
    }

    #[test]
    fn the_backends_capabilities_choose_the_claimers() {
        let caps = |single_writer, few_claimers| Capabilities {
            skip_locked: true,
            single_writer,
            few_claimers,
            row_locks: true,
            bounded_tx_claims: false,
        };
        assert_eq!(Claimers::of(&caps(false, false)), Claimers::Many);
        assert_eq!(Claimers::of(&caps(false, true)), Claimers::Few);
        assert_eq!(Claimers::of(&caps(true, false)), Claimers::OneWriter);
    }

    #[test]
    fn a_claim_batch_set_by_hand_stays_within_the_queues_concurrency() {
        assert_eq!(plan(1000, |c| c.claim_batch = Some(300)).max_claim, 300);
        assert_eq!(plan(200, |c| c.claim_batch = Some(300)).max_claim, 200);
        assert_eq!(plan(200, |c| c.claim_batch = Some(0)).max_claim, 1);
        assert_eq!(plan(200, |c| c.complete_batch = 0).complete_max, 1);
    }

    #[test]
    fn a_claim_asks_for_its_free_slots_up_to_the_max() {
        let p = plan(10, |c| c.claim_batch = Some(4));
        assert_eq!((p.limit(1), p.limit(4), p.limit(9)), (1, 4, 4));
        assert!(p.room_for_more(3) && !p.room_for_more(4));
        assert!(!p.full(1, 2) && p.full(1, 3) && p.full(6, 0));
    }

    #[test]
    fn a_transaction_claim_goes_ahead_of_its_slots_only_after_jobs_ended_at_once() {
        // Concurrency 100 on PostgreSQL: two loops of 50, each going ahead up to 250.
        let p = plan(100, |_| {});
        assert_eq!((p.max_claim, p.ahead), (50, MANY_CLAIMERS_CLAIM_MAX));
        assert_eq!((p.tx_limit(7, false), p.tx_limit(80, false)), (7, 50));
        assert_eq!(p.tx_limit(7, true), MANY_CLAIMERS_CLAIM_MAX as u32);
        // MySQL and MariaDB: up to their claims of 500.
        let p = plan_for(Claimers::Few, 100, |_| {});
        assert_eq!(p.tx_limit(1, true), FEW_CLAIMERS_CLAIM_MAX as u32);
        // A claim size set by hand is the most a claim takes, ahead or not.
        let p = plan(10, |c| c.claim_batch = Some(40));
        assert_eq!((p.tx_limit(3, false), p.tx_limit(3, true)), (3, 40));
        let p = plan(1000, |c| c.claim_batch = Some(40));
        assert_eq!((p.tx_limit(300, false), p.tx_limit(300, true)), (40, 40));
        // One writer (SQLite) makes no transaction claims; its plan never goes ahead.
        let p = plan_for(Claimers::OneWriter, 100, |_| {});
        assert_eq!(p.tx_limit(30, true), 30);
    }

    #[test]
    fn jobs_of_its_own_hold_slots_until_recorded() {
        let p = plan(4, |_| {});
        assert!(p.own_jobs_running(3));
        assert!(!p.own_jobs_running(4));
    }

    #[test]
    fn an_empty_queue_is_polled_more_slowly_until_jobs_arrive() {
        let mut idle = Idle::new(Duration::from_millis(50));
        let mut waits = vec![];
        for _ in 0..4 {
            let d = idle.delay();
            waits.push(idle.wait);
            assert!(d >= idle.wait && d <= idle.wait * 5 / 4, "{d:?}");
            idle.slower();
        }
        let ms = Duration::from_millis;
        assert_eq!(waits, [ms(10), ms(20), ms(40), ms(50)]);
        idle.reset();
        assert_eq!(idle, Idle::new(ms(50)));
        let mut floor = Idle::new(Duration::ZERO);
        floor.slower();
        assert_eq!(floor.wait, MIN_IDLE, "never faster than MIN_IDLE");
    }
}
