//! Durations as users type them: `500ms`, `30s`, `5m`, `2h`.

use std::time::Duration;

use crate::{Error, Result};

/// Longest duration accepted anywhere (ten years).
const MAX: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Reads a duration like `500ms`, `30s`, `5m`, `2h` or `1h 30m`; a bare number is refused (the
/// unit must be explicit).
///
/// # Example
/// ```
/// use std::time::Duration;
/// assert_eq!(backlog_core::parse_duration("5m").unwrap(), Duration::from_secs(300));
/// assert!(backlog_core::parse_duration("5").is_err());
/// ```
pub fn parse_duration(input: &str) -> Result<Duration> {
    let err = |reason: String| Error::DurationInvalid {
        input: input.to_owned(),
        reason,
    };
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(err("empty".into()));
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err("missing unit".into()));
    }
    let d = humantime::parse_duration(trimmed).map_err(|e| err(e.to_string()))?;
    if d > MAX {
        return Err(err("longer than ten years".into()));
    }
    Ok(d)
}

/// Formats a duration the way [`parse_duration`] reads it.
pub fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_forms() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        for bad in ["", "5", "-5s", "5 parsecs", "abc", "99999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }
}
