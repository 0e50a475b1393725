//! The injectable clock. All times in backlog are microseconds since the Unix epoch, UTC.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The current wall-clock time in microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// A source of the current time; tests inject a [`ManualClock`] and advance it instead of sleeping.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Now, in microseconds since the Unix epoch.
    fn now(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        now_micros()
    }
}

/// A clock that moves only when told to.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use backlog_core::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000_000);
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now(), 3_000_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `micros`.
    pub fn new(micros: i64) -> Self {
        ManualClock(Arc::new(AtomicI64::new(micros)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_micros() as i64, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, micros: i64) {
        self.0.store(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
