//! Claim cursors: where this process's last claim on each shard of a queue ended, so that the
//! next claim starts there instead of at the head of the claim index.
//!
//! Why: every job claimed or completed leaves an index entry behind that only vacuum (InnoDB:
//! purge) removes, and neither may remove it while another session holds an old snapshot (a
//! `REPEATABLE READ` report, `pg_dump`, an idle transaction, a replica's feedback). A claim that
//! starts at the head walks past all of them: on PostgreSQL 1,129 → 9,855 buffers a claim of
//! 100 after 200,000 jobs, on MariaDB 2,205 → 600,791 pages
//! (`docs/bench-journal/2026-11-28-held-snapshot-bare-sql.md`). A FIFO claim takes keys
//! `(priority, run_at, id)` in order, so what lies before the last key it took is, but for a few
//! cases below, claimed already: starting past it skips the dead head whatever its length.
//!
//! What can lie behind a cursor: a job of a better priority enqueued after the cursor passed
//! its place, a job whose producer's transaction committed after a claim took later keys, a
//! job a claimer skipped while another held its lock and then let go (a rolled-back claim, a
//! rescued lease, a moved shard). So a claim now and then is a **full pass** from the head, as
//! before. It runs when the time since the last one is at least [`FULL_PASS_FACTOR`] times
//! what the last one took, and at most [`FULL_PASS_MAX`] apart: on a healthy database, where a
//! full pass costs what a cursor claim does (about a millisecond), it is every few claims and
//! nothing waits behind a cursor for longer than that; under a held snapshot, where a full
//! pass walks the dead head, it stays under a twentieth of the claim loop's time.
//!
//! LIFO claims take the newest keys first, where new jobs arrive: a cursor cannot help them,
//! and they always claim from the head.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use backlog_core::{Kind, Ordering};

/// A full pass comes at least this many times its own last duration after the previous one.
pub(crate) const FULL_PASS_FACTOR: u32 = 20;

/// A full pass comes at most this long after the previous one.
pub(crate) const FULL_PASS_MAX: Duration = Duration::from_secs(10);

/// A claim index key past which a FIFO claim starts: `(priority, run_at, id)`.
pub(crate) type Key = (i16, i64, i64);

/// The cursors of one backend (one process), by queue and kind filter.
#[derive(Debug, Default)]
pub(crate) struct Cursors {
    queues: Mutex<HashMap<(String, Vec<String>), QueueCursor>>,
    /// Where the scans that are not claims start: see [`Floor`].
    floors: Mutex<HashMap<Floor, (i64, Passes)>>,
    /// When the leader's sweep last moved jobs off shards their queue no longer has.
    last_reshard: Mutex<Option<Instant>>,
}

/// The sweep's search for jobs on shards a lowered count dropped comes at most this often. On
/// MariaDB under a held snapshot one such probe of an empty range took 0.5 s (9,842 pages), and
/// the sweep runs before claims every second; a lowered count moves its jobs at once anyway
/// (`queue_upsert`), the sweep only catches jobs that were running then.
pub(crate) const RESHARD_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct QueueCursor {
    /// By shard; `None`: no claim of this process found a job there yet.
    keys: Vec<Option<Key>>,
    passes: Passes,
}

/// When a full pass from the head is due.
#[derive(Debug, Default, Clone, Copy)]
struct Passes {
    /// When the last full pass started, if one did (`None`: the next is due).
    last_full: Option<Instant>,
    /// What the last full pass took.
    full_cost: Duration,
}

impl Passes {
    /// True (and taken, so that others go on from the cursor meanwhile) when a full pass is due.
    fn take_full(&mut self, now: Instant) -> bool {
        let due = match self.last_full {
            None => true,
            Some(at) => {
                let gap = (self.full_cost * FULL_PASS_FACTOR).min(FULL_PASS_MAX);
                now.duration_since(at) >= gap
            }
        };
        if due {
            self.last_full = Some(now);
        }
        due
    }
}

/// A scan other than a claim that would walk the same dead head, and the value below which it
/// need not look (but at a full pass).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Floor {
    /// The leader's pruning of a queue's finished jobs in one state: the largest id it removed.
    /// Pruning takes the oldest ids first and leaves the dead head behind as claims do.
    Prune { queue: String, state: String },
    /// The leader's pruning of a queue's completed jobs kept apart in `backlog_job_done`
    /// (PostgreSQL): the latest finish time it removed. That pruning takes the oldest finish
    /// first, from the floor on (`>=`: jobs that finished in the same microsecond stay in view).
    Done { queue: String },
    /// The rescue of expired leases: the time (µs) up to which its last complete pass looked.
    /// Every lease index entry of a job that ran and finished stays behind it, expired; a
    /// lease set since expires later than the claim that set it, so a pass need only look at
    /// leases that expired since the one before. A lease a pass skipped while another session
    /// held its row waits for the next full pass.
    Rescue,
}

impl Floor {
    pub(crate) fn prune(queue: &str, state: &str) -> Floor {
        Floor::Prune {
            queue: queue.to_owned(),
            state: state.to_owned(),
        }
    }
}

/// Where one scan starts: past `after`, or at the head (`i64::MIN`) for a full pass. Hand it
/// back to [`Cursors::floor_record`].
#[derive(Debug)]
pub(crate) struct FloorPlan {
    floor: Floor,
    /// The scan takes values from this one on (`>=`, or `>` where the floor is a taken id).
    pub(crate) after: i64,
    full: bool,
    started: Instant,
}

/// What one claim of a queue costs the database, from this process's cursors and as a full
/// pass from the head: buffers on PostgreSQL (shared hits and reads), pages on MySQL/MariaDB
/// (`pages_accessed`). See `PgBackend::claim_cost`.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimCost {
    /// The claim from the cursors (what most claims are).
    pub cursor: u64,
    /// The same claim from the head of every shard.
    pub full_pass: u64,
}

/// How one claim starts: from the cursors, or from the head (a full pass). Hand it back to
/// [`Cursors::record`] with what the claim took.
#[derive(Debug)]
pub(crate) struct Plan {
    id: Option<(String, Vec<String>)>,
    keys: Vec<Option<Key>>,
    started: Instant,
}

impl Plan {
    /// A plan that claims from the head and records nothing (LIFO, or a claim with no cursor).
    pub(crate) fn head() -> Plan {
        Plan {
            id: None,
            keys: vec![],
            started: Instant::now(),
        }
    }

    /// A plan that starts at `keys` (by shard) and records nothing: to look at a claim.
    pub(crate) fn at(keys: Vec<Option<Key>>) -> Plan {
        Plan {
            id: None,
            keys,
            started: Instant::now(),
        }
    }

    /// True when this claim starts at the head of every shard.
    pub(crate) fn full(&self) -> bool {
        self.keys.iter().all(Option::is_none)
    }

    /// Where the claim starts on `shard` (`None`: at its head).
    pub(crate) fn key(&self, shard: i32) -> Option<Key> {
        self.keys
            .get(usize::try_from(shard).ok()?)
            .copied()
            .flatten()
    }

    /// The cursors as PostgreSQL's claim statements take them: three values a shard, shard by
    /// shard from 0 (priority, run_at, id), the smallest key for a shard without a cursor; an
    /// empty array for a full pass (the statements read a missing shard as the head).
    pub(crate) fn flat(&self) -> Vec<i64> {
        if self.full() {
            return vec![];
        }
        let head = (i16::MIN, i64::MIN, i64::MIN);
        (self.keys.iter())
            .flat_map(|k| {
                let (p, r, i) = k.unwrap_or(head);
                [i64::from(p), r, i]
            })
            .collect()
    }
}

impl Cursors {
    /// How the next claim of `queue` (only `kinds`, if any) in `order` starts.
    pub(crate) fn plan(&self, queue: &str, kinds: &[Kind], order: Ordering) -> Plan {
        if order == Ordering::Lifo {
            return Plan::head();
        }
        let id = (
            queue.to_owned(),
            kinds.iter().map(|k| k.as_str().to_owned()).collect(),
        );
        let now = Instant::now();
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let c = queues.entry(id.clone()).or_default();
        let keys = match c.passes.take_full(now) {
            true => vec![],
            false => c.keys.clone(),
        };
        Plan {
            id: Some(id),
            keys,
            started: now,
        }
    }

    /// What a claim made with `plan` took: each claimed job's shard and key. Each shard's
    /// cursor moves to the largest key claimed there, never back.
    pub(crate) fn record(&self, plan: &Plan, claimed: impl IntoIterator<Item = (i32, Key)>) {
        let Some(id) = &plan.id else {
            return;
        };
        let took = plan.started.elapsed();
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let c = queues.entry(id.clone()).or_default();
        if plan.full() {
            c.passes.full_cost = took;
        }
        for (shard, key) in claimed {
            let Ok(s) = usize::try_from(shard) else {
                continue;
            };
            if s >= c.keys.len() {
                c.keys.resize(s + 1, None);
            }
            if c.keys[s].is_none_or(|k| key > k) {
                c.keys[s] = Some(key);
            }
        }
    }

    /// Something this process did may have put jobs behind the cursors (a retry due at once,
    /// a release, a rescue, a promotion in an ordered group, an operator's action, a claim left
    /// undone): every queue's next claim is a full pass.
    pub(crate) fn rewind(&self) {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        for c in queues.values_mut() {
            c.passes.last_full = None;
        }
    }

    /// Jobs enqueued by this process, as (queue, priority, due time): a queue's next claim is a
    /// full pass when one of them sorts before a cursor of that queue (a better priority than
    /// the claims reached, or due earlier), where a claim from the cursor would not see it.
    pub(crate) fn enqueued<'a>(&self, jobs: impl IntoIterator<Item = (&'a str, i16, i64)>) {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        if queues.is_empty() {
            return;
        }
        for (queue, priority, run_at) in jobs {
            for ((q, _), c) in queues.iter_mut() {
                let behind = q == queue
                    && c.passes.last_full.is_some()
                    && (c.keys.iter().flatten()).any(|k| (priority, run_at) < (k.0, k.1));
                if behind {
                    c.passes.last_full = None;
                }
            }
        }
    }

    /// Where the next scan for `floor` starts: at its floor, or at the head when a full pass
    /// is due (the same schedule as claims': see the module's documentation).
    pub(crate) fn floor_plan(&self, floor: Floor) -> FloorPlan {
        let now = Instant::now();
        let mut floors = self.floors.lock().unwrap_or_else(|e| e.into_inner());
        let (after, passes) = floors
            .entry(floor.clone())
            .or_insert((i64::MIN, Passes::default()));
        let full = passes.take_full(now);
        FloorPlan {
            floor,
            after: if full { i64::MIN } else { *after },
            full,
            started: now,
        }
    }

    /// What a scan made with `plan` reached (the largest id pruned; the time up to which a
    /// rescue found every expired lease), if anything: the floor rises to it, never back.
    pub(crate) fn floor_record(&self, plan: &FloorPlan, reached: Option<i64>) {
        let mut floors = self.floors.lock().unwrap_or_else(|e| e.into_inner());
        let (after, passes) =
            (floors.entry(plan.floor.clone())).or_insert((i64::MIN, Passes::default()));
        if plan.full {
            passes.full_cost = plan.started.elapsed();
        }
        if let Some(v) = reached {
            *after = (*after).max(v);
        }
    }

    /// True (and taken) when the sweep's search for jobs on dropped shards is due: the first
    /// time, then every [`RESHARD_EVERY`].
    pub(crate) fn reshard_due(&self) -> bool {
        let mut last = self.last_reshard.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let due = last.is_none_or(|at| now.duration_since(at) >= RESHARD_EVERY);
        if due {
            *last = Some(now);
        }
        due
    }

    /// The cursors of `queue` (no kind filter), shard by shard.
    pub(crate) fn keys(&self, queue: &str) -> Vec<Option<Key>> {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        (queues.get(&(queue.to_owned(), vec![])))
            .map(|c| c.keys.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(c: &Cursors) -> Plan {
        c.plan("q", &[], Ordering::Fifo)
    }

    #[test]
    fn first_claim_is_a_full_pass_and_the_next_starts_past_it() {
        let c = Cursors::default();
        let p = fifo(&c);
        assert!(p.full());
        assert!(p.flat().is_empty());
        c.record(&p, [(0, (0, 10, 1)), (0, (0, 10, 2)), (2, (1, 5, 7))]);
        let next = fifo(&c);
        assert!(
            !next.full(),
            "a full pass that took microseconds is not due again at once"
        );
        assert_eq!(next.key(0), Some((0, 10, 2)));
        assert_eq!(next.key(1), None);
        assert_eq!(next.key(2), Some((1, 5, 7)));
        assert_eq!(next.key(3), None);
        let head = (i64::from(i16::MIN), i64::MIN, i64::MIN);
        assert_eq!(next.flat(), vec![0, 10, 2, head.0, head.1, head.2, 1, 5, 7]);
    }

    #[test]
    fn a_cursor_never_moves_back() {
        let c = Cursors::default();
        let p = fifo(&c);
        c.record(&p, [(0, (0, 10, 5))]);
        // A later full pass that found a job stranded behind the cursor.
        c.record(&p, [(0, (0, 3, 1))]);
        assert_eq!(c.keys("q"), vec![Some((0, 10, 5))]);
    }

    #[test]
    fn a_full_pass_comes_again_after_twenty_times_its_cost() {
        let c = Cursors::default();
        let p = fifo(&c);
        std::thread::sleep(Duration::from_millis(5));
        c.record(&p, [(0, (0, 1, 1))]);
        // The full pass took ≥ 5 ms: the next is ≥ 100 ms after it started.
        assert!(!fifo(&c).full());
        std::thread::sleep(Duration::from_millis(120));
        let again = fifo(&c);
        assert!(again.full());
        // Taken by that claim: the others go on from the cursors meanwhile.
        assert!(!fifo(&c).full());
    }

    #[test]
    fn what_may_lie_behind_a_cursor_brings_a_full_pass() {
        let c = Cursors::default();
        let p = fifo(&c);
        c.record(&p, [(0, (5, 100, 7))]);
        assert!(!fifo(&c).full());
        // Later in the order: the cursor finds them.
        c.enqueued([("q", 5, 100), ("q", 5, 200), ("q", 6, 50), ("other", 0, 0)]);
        assert!(!fifo(&c).full());
        // A better priority, or due before the cursor: only a full pass finds them.
        for behind in [("q", 4, 500), ("q", 5, 99)] {
            c.enqueued([behind]);
            assert!(fifo(&c).full(), "{behind:?}");
            assert!(!fifo(&c).full());
        }
        c.rewind();
        assert!(fifo(&c).full());
        assert_eq!(
            c.keys("q"),
            vec![Some((5, 100, 7))],
            "a full pass keeps the cursor"
        );
    }

    #[test]
    fn pruning_goes_on_past_the_largest_id_it_removed() {
        let c = Cursors::default();
        let first = c.floor_plan(Floor::prune("q", "completed"));
        assert_eq!(first.after, i64::MIN, "the first batch is a full pass");
        c.floor_record(&first, Some(1_000));
        let next = c.floor_plan(Floor::prune("q", "completed"));
        assert_eq!(next.after, 1_000);
        c.floor_record(&next, None);
        assert_eq!(c.floor_plan(Floor::prune("q", "completed")).after, 1_000);
        assert_eq!(
            c.floor_plan(Floor::prune("q", "dead")).after,
            i64::MIN,
            "a floor per state"
        );
    }

    #[test]
    fn a_rescue_looks_only_at_leases_expired_since_its_last_complete_pass() {
        let c = Cursors::default();
        let first = c.floor_plan(Floor::Rescue);
        assert_eq!(first.after, i64::MIN, "the first pass is a full pass");
        c.floor_record(&first, Some(5_000));
        let next = c.floor_plan(Floor::Rescue);
        assert_eq!(next.after, 5_000);
        // A pass that hit its limit reached nothing: the next starts where it did.
        c.floor_record(&next, None);
        assert_eq!(c.floor_plan(Floor::Rescue).after, 5_000);
        assert_eq!(
            c.floor_plan(Floor::prune("q", "completed")).after,
            i64::MIN,
            "pruning keeps its own floor"
        );
    }

    #[test]
    fn lifo_and_kind_filters_keep_their_own_way() {
        let c = Cursors::default();
        let p = fifo(&c);
        c.record(&p, [(0, (0, 1, 1))]);
        let lifo = c.plan("q", &[], Ordering::Lifo);
        assert!(lifo.full());
        c.record(&lifo, [(0, (0, 9, 9))]);
        assert_eq!(c.keys("q"), vec![Some((0, 1, 1))], "LIFO records nothing");
        let kinds = [Kind::new("email").unwrap()];
        assert!(c.plan("q", &kinds, Ordering::Fifo).full(), "its own cursor");
    }
}
