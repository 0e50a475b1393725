//! A warning a loop repeats (a claim or a completion failing while the database cannot write),
//! logged at most once per interval, with how often it came in between: a full disk that lasts
//! ten minutes is a few lines in the log, not one per poll.

use std::fmt::Display;
use std::time::Duration;

use tokio::time::Instant;

/// How often a repeated warning is logged.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(30);

/// One repeated warning's state.
#[derive(Debug)]
pub(crate) struct Throttled {
    every: Duration,
    last: Option<Instant>,
    /// Warnings not logged since the last one that was.
    since: u64,
}

impl Throttled {
    pub fn new(every: Duration) -> Self {
        Throttled {
            every,
            last: None,
            since: 0,
        }
    }

    /// Logs `msg` unless a warning was logged within the interval (then counts it); whether it
    /// was logged.
    pub fn warn(&mut self, msg: impl Display) -> bool {
        let now = Instant::now();
        if self.last.is_some_and(|t| now - t < self.every) {
            self.since += 1;
            return false;
        }
        match std::mem::take(&mut self.since) {
            0 => tracing::warn!("{msg}"),
            n => tracing::warn!("{msg} ({n} more like it since the last such warning)"),
        }
        self.last = Some(now);
        true
    }

    /// Whether any warning came since the state was made (the condition was met at least once).
    pub fn warned(&self) -> bool {
        self.last.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_repeated_warning_is_logged_once_per_interval() {
        let mut t = Throttled::new(Duration::from_secs(30));
        assert!(!t.warned());
        assert!(t.warn("first"));
        for _ in 0..100 {
            tokio::time::advance(Duration::from_millis(100)).await;
            assert!(!t.warn("again"));
        }
        assert_eq!(t.since, 100);
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(t.warn("after the interval"));
        assert_eq!(t.since, 0);
        assert!(t.warned());
    }
}
