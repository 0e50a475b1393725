//! Where a client's "now" comes from: the database's clock, read as the client's own clock plus
//! an offset measured from the database, so that processes whose clocks disagree still agree on
//! when a lease expires and when a job is due (docs/state-machine.md, "Time").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use backlog_core::{Backend, Clock, Result};

/// How often the offset is measured again, by the client's clock.
pub(crate) const RESYNC_EVERY: Duration = Duration::from_secs(60);

/// Samples per measurement: the one with the shortest round trip is kept.
const SAMPLES: usize = 3;

/// An offset at least this large is logged as a warning.
const WARN_OFFSET_US: i64 = 1_000_000;

/// Where a [`Client`](crate::Client)'s "now" comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeSource {
    /// The database's clock (the default): the client's clock plus an offset measured from the
    /// database when the client connects, when a worker starts, and every minute after. Every
    /// process then reads one time, whatever its own clock says.
    #[default]
    Database,
    /// The client's clock as it is, never compared with the database's (tests that move a
    /// [`ManualClock`](backlog_core::ManualClock) by hand).
    Local,
}

/// One measurement of the database's clock against the client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSync {
    /// The database's clock minus the client's, in microseconds: positive when the client's
    /// clock is behind.
    pub offset_us: i64,
    /// The round trip of the sample kept: the offset is at most this much above the true one,
    /// and never below it.
    pub round_trip_us: i64,
}

/// The client's time: its clock, and the offset to the database's.
#[derive(Debug)]
pub(crate) struct Time {
    clock: Arc<dyn Clock>,
    source: TimeSource,
    offset: AtomicI64,
    /// When the offset was last measured, by the client's clock (`i64::MIN`: never).
    synced_at: AtomicI64,
    /// A measurement is under way (only one at a time).
    syncing: AtomicBool,
    /// The offset last logged as a warning, to say each change once.
    warned: AtomicI64,
}

impl Time {
    pub(crate) fn new(clock: Arc<dyn Clock>, source: TimeSource) -> Self {
        Time {
            clock,
            source,
            offset: AtomicI64::new(0),
            synced_at: AtomicI64::new(i64::MIN),
            syncing: AtomicBool::new(false),
            warned: AtomicI64::new(0),
        }
    }

    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    pub(crate) fn source(&self) -> TimeSource {
        self.source
    }

    /// Now: the client's clock, moved by the measured offset when the source is the database.
    pub(crate) fn now(&self) -> i64 {
        let local = self.clock.now();
        match self.source {
            TimeSource::Database => local.saturating_add(self.offset.load(Ordering::Relaxed)),
            TimeSource::Local => local,
        }
    }

    /// The offset in use (0 until measured, and always with [`TimeSource::Local`]).
    pub(crate) fn offset(&self) -> i64 {
        match self.source {
            TimeSource::Database => self.offset.load(Ordering::Relaxed),
            TimeSource::Local => 0,
        }
    }

    /// Whether a new measurement is due: never measured, or not for [`RESYNC_EVERY`].
    fn due(&self) -> bool {
        if self.source != TimeSource::Database {
            return false;
        }
        let at = self.synced_at.load(Ordering::Relaxed);
        at == i64::MIN || self.clock.now().saturating_sub(at) >= RESYNC_EVERY.as_micros() as i64
    }

    /// Measures the offset now. `None` when the source is local or the backend has no clock of
    /// its own; the offset is then left as it was.
    pub(crate) async fn sync(&self, backend: &dyn Backend) -> Result<Option<ClockSync>> {
        if self.source != TimeSource::Database {
            return Ok(None);
        }
        let mut best: Option<ClockSync> = None;
        for _ in 0..SAMPLES {
            let before = self.clock.now();
            let Some(db) = backend.db_now().await? else {
                return Ok(None);
            };
            let after = self.clock.now();
            // The database read its clock somewhere in the round trip: taking its start makes
            // the offset the largest it can be, so the client's time is never behind the
            // database's (a job a plain INSERT just made is due at once) and at most a round
            // trip ahead. The midpoint was half a round trip off either way, and under load a
            // plain INSERT was now and then not due yet.
            let sample = ClockSync {
                offset_us: db - before,
                round_trip_us: after - before,
            };
            if best.is_none_or(|b| sample.round_trip_us < b.round_trip_us) {
                best = Some(sample);
            }
        }
        let best = best.expect("SAMPLES > 0");
        self.offset.store(best.offset_us, Ordering::Relaxed);
        self.synced_at.store(self.clock.now(), Ordering::Relaxed);
        self.report(best);
        Ok(Some(best))
    }

    /// Logs an offset worth knowing about, once per change of more than a second.
    fn report(&self, sync: ClockSync) {
        let offset = sync.offset_us;
        let last = self.warned.load(Ordering::Relaxed);
        if offset.abs() >= WARN_OFFSET_US && (offset - last).abs() >= WARN_OFFSET_US {
            self.warned.store(offset, Ordering::Relaxed);
            tracing::warn!(
                offset_ms = offset / 1000,
                round_trip_us = sync.round_trip_us,
                "this machine's clock is {:.3} s {} the database's; backlog reads the database's \
                 time (measured every minute), but fix the clock (NTP)",
                offset.unsigned_abs() as f64 / 1e6,
                if offset > 0 { "behind" } else { "ahead of" },
            );
        } else {
            tracing::debug!(
                offset_us = offset,
                round_trip_us = sync.round_trip_us,
                "database clock measured"
            );
        }
    }

    /// Measures again in the background when due (no-op outside a tokio runtime). Errors are
    /// logged: the last offset stays in use, and the next call tries again.
    pub(crate) fn resync_if_due(self: &Arc<Self>, backend: &Arc<dyn Backend>) {
        if !self.due() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.syncing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (time, backend) = (self.clone(), backend.clone());
        handle.spawn(async move {
            if let Err(e) = time.sync(backend.as_ref()).await {
                tracing::debug!(error = %e, "could not measure the database clock");
            }
            time.syncing.store(false, Ordering::Release);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backlog_core::ManualClock;

    fn skewed(by: i64) -> (ManualClock, Time) {
        let clock = ManualClock::new(1_000_000_000 + by);
        let time = Time::new(Arc::new(clock.clone()), TimeSource::Database);
        (clock, time)
    }

    #[test]
    fn local_source_reads_the_clock_as_is() {
        let clock = ManualClock::new(42);
        let time = Time::new(Arc::new(clock.clone()), TimeSource::Local);
        time.offset.store(1_000, Ordering::Relaxed);
        assert_eq!(time.now(), 42);
        assert_eq!(time.offset(), 0);
        assert!(!time.due());
    }

    #[test]
    fn database_source_adds_the_offset() {
        let (_clock, time) = skewed(30_000_000);
        time.offset.store(-30_000_000, Ordering::Relaxed);
        assert_eq!(time.now(), 1_000_000_000);
    }

    #[tokio::test]
    async fn a_backend_without_a_clock_leaves_the_offset() {
        // A memory backend has no clock of its own: nothing is measured, nothing changes.
        let backend: Arc<dyn Backend> = Arc::new(backlog_memory::MemoryBackend::new());
        let (_clock, time) = skewed(5);
        assert_eq!(time.sync(backend.as_ref()).await.unwrap(), None);
        assert_eq!(time.offset(), 0);
        assert!(time.due(), "still never measured");
    }

    #[test]
    fn due_after_a_minute() {
        let (clock, time) = skewed(0);
        assert!(time.due());
        time.synced_at.store(clock.now(), Ordering::Relaxed);
        assert!(!time.due());
        clock.advance(RESYNC_EVERY - Duration::from_millis(1));
        assert!(!time.due());
        clock.advance(Duration::from_millis(1));
        assert!(time.due());
    }
}
