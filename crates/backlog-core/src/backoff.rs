//! Retry backoff: capped exponential with jitter.

use std::time::Duration;

use rand::Rng;

/// The delay before retry number `attempt` (1 after the first failure): `base · 2^(attempt-1)`,
/// capped at `max`, then "equal jitter" (a random point in the upper half) so that jobs that failed
/// together do not retry together.
///
/// # Example
/// ```
/// use std::time::Duration;
/// let d = backlog_core::backoff_delay(3, Duration::from_secs(1), Duration::from_secs(60));
/// assert!(d >= Duration::from_secs(2) && d <= Duration::from_secs(4));
/// ```
pub fn backoff_delay(attempt: u32, base: Duration, max: Duration) -> Duration {
    let exp = attempt.saturating_sub(1).min(62);
    let raw = base.saturating_mul(1u32 << exp.min(31));
    let capped = raw.min(max);
    let half = capped / 2;
    let jitter_us = rand::rng().random_range(0..=half.as_micros().max(1) as u64);
    half + Duration::from_micros(jitter_us).min(capped - half)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_caps() {
        let base = Duration::from_secs(1);
        let max = Duration::from_secs(10);
        for _ in 0..100 {
            let d1 = backoff_delay(1, base, max);
            assert!(d1 >= Duration::from_millis(500) && d1 <= base, "{d1:?}");
            let d10 = backoff_delay(10, base, max);
            assert!(d10 >= Duration::from_secs(5) && d10 <= max, "{d10:?}");
            let huge = backoff_delay(u32::MAX, base, max);
            assert!(huge <= max);
        }
    }
}
