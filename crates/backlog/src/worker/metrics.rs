//! What one worker process is doing, for its own `/metrics` (`backlog work --metrics ADDR`):
//! the jobs it runs per queue against its concurrency, its claims and how long each took, and
//! the outcomes it recorded. The database's counts (`backlog_stat`) are the whole system's; these
//! are this process's alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::QueueName;

/// Upper bounds of the claim-duration histogram, in microseconds (then one for longer).
pub const CLAIM_BOUNDS_US: [u64; 7] = [1_000, 5_000, 10_000, 50_000, 100_000, 500_000, 1_000_000];

/// Claim round trips: how many and how long (each one's statement, with the completions it
/// carried).
#[derive(Debug, Default)]
pub(crate) struct ClaimTimes {
    count: AtomicU64,
    sum_us: AtomicU64,
    buckets: [AtomicU64; CLAIM_BOUNDS_US.len() + 1],
}

impl ClaimTimes {
    pub(crate) fn record(&self, took: Duration) {
        let us = took.as_micros().min(u64::MAX as u128) as u64;
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        let i = CLAIM_BOUNDS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(CLAIM_BOUNDS_US.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// The queues of the current run: each one's slots, to count the jobs that hold one.
#[derive(Debug, Default)]
pub(crate) struct Loads(Mutex<Vec<(QueueName, usize, Arc<Semaphore>)>>);

impl Loads {
    pub(crate) fn set(&self, loads: Vec<(QueueName, usize, Arc<Semaphore>)>) {
        *self.0.lock().expect("lock") = loads;
    }
}

/// One queue's load in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueLoad {
    /// The queue.
    pub queue: String,
    /// The most jobs this process runs at once.
    pub concurrency: usize,
    /// Jobs claimed and not yet recorded (running, or finished and awaiting their completion).
    pub running: usize,
}

/// A snapshot of one worker process (see [`crate::Worker::metrics`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerMetrics {
    /// Each queue's load; empty while the worker is not running.
    pub queues: Vec<QueueLoad>,
    /// Claim round trips made.
    pub claims: u64,
    /// Their total duration, in seconds.
    pub claim_seconds_sum: f64,
    /// (upper bound in seconds, claims in this bucket alone); the last bound is infinite.
    pub claim_buckets: Vec<(f64, u64)>,
    /// Jobs this process completed.
    pub completed: u64,
    /// Failed attempts it recorded.
    pub failed: u64,
    /// Jobs it released (shutdown, snooze).
    pub released: u64,
    /// Outcomes refused because the lease was gone.
    pub lost: u64,
    /// The database's clock minus this process's, in seconds, as last measured; `None` when
    /// the process uses its own clock ([`crate::TimeSource::Local`]).
    pub clock_offset_seconds: Option<f64>,
}

/// Counters shared by the executors.
#[derive(Default)]
pub(crate) struct Counters {
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub released: AtomicU64,
    pub lost: AtomicU64,
}

pub(crate) fn snapshot(loads: &Loads, times: &ClaimTimes, c: &Counters) -> WorkerMetrics {
    let queues = loads
        .0
        .lock()
        .expect("lock")
        .iter()
        .map(|(q, concurrency, slots)| QueueLoad {
            queue: q.as_str().to_owned(),
            concurrency: *concurrency,
            running: concurrency.saturating_sub(slots.available_permits()),
        })
        .collect();
    let bounds = CLAIM_BOUNDS_US
        .iter()
        .map(|us| *us as f64 / 1e6)
        .chain([f64::INFINITY]);
    WorkerMetrics {
        queues,
        claims: times.count.load(Ordering::Relaxed),
        claim_seconds_sum: times.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
        claim_buckets: bounds
            .zip(times.buckets.iter().map(|b| b.load(Ordering::Relaxed)))
            .collect(),
        completed: c.completed.load(Ordering::Relaxed),
        failed: c.failed.load(Ordering::Relaxed),
        released: c.released.load(Ordering::Relaxed),
        lost: c.lost.load(Ordering::Relaxed),
        clock_offset_seconds: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_fall_in_their_buckets() {
        let t = ClaimTimes::default();
        for ms in [0, 1, 2, 7, 2_000] {
            t.record(Duration::from_millis(ms));
        }
        let loads = Loads::default();
        let sem = Arc::new(Semaphore::new(4));
        let _held = sem.clone().try_acquire_many_owned(3).unwrap();
        loads.set(vec![(QueueName::new("q").unwrap(), 4, sem)]);
        let m = snapshot(&loads, &t, &Default::default());
        let counts: Vec<u64> = m.claim_buckets.iter().map(|b| b.1).collect();
        assert_eq!(counts, vec![2, 1, 1, 0, 0, 0, 0, 1]);
        assert_eq!(m.claims, 5);
        assert!(m.claim_buckets.last().unwrap().0.is_infinite());
        assert_eq!(m.queues[0].running, 3);
    }
}
