//! What `--json` prints, the same rules for every command (docs/cli-json.md shows each shape):
//!
//! - JSON the database stores (a job's payload, progress and result) is embedded as JSON, not as
//!   a string holding it. It is passed through as stored, so numbers keep every digit.
//! - Every time keeps its field in microseconds since the Unix epoch (scripts read those), and
//!   has an RFC 3339 UTC string beside it, named after it with `_rfc3339` added
//!   (`run_at` and `run_at_rfc3339`); both are null when the time is unset.
//!
//! These are views of the library's types: the library keeps its own serde shape.

use backlog::{ErrorRecord, Job, JobState};
use serde::Serialize;
use serde_json::value::RawValue;

/// A time in microseconds since the epoch as RFC 3339 UTC, to the microsecond.
pub fn rfc3339(us: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(us.max(0) as u64);
    humantime::format_rfc3339_micros(t).to_string()
}

/// Stored JSON text as JSON.
fn raw<'a>(job: i64, what: &str, text: &'a str) -> anyhow::Result<&'a RawValue> {
    serde_json::from_str(text)
        .map_err(|e| anyhow::anyhow!("job {job}: the stored {what} is not JSON: {e}"))
}

/// A job as `job show`, `job list` and `dead list` print it.
#[derive(Debug, Serialize)]
pub struct JobView<'a> {
    id: i64,
    queue: &'a str,
    kind: Option<&'a str>,
    /// The stored state.
    state: JobState,
    /// The state as a user sees it (`scheduled`, `retrying` for available jobs not yet due).
    reported_state: &'static str,
    payload: &'a RawValue,
    priority: i16,
    run_at: i64,
    run_at_rfc3339: String,
    attempt: i32,
    max_attempts: Option<i32>,
    lease_token: Option<i64>,
    lease_owner: Option<&'a str>,
    lease_expires_at: Option<i64>,
    lease_expires_at_rfc3339: Option<String>,
    unique_key: Option<&'a str>,
    errors: Vec<ErrorView<'a>>,
    result: Option<&'a RawValue>,
    progress: Option<&'a RawValue>,
    created_at: i64,
    created_at_rfc3339: String,
    attempted_at: Option<i64>,
    attempted_at_rfc3339: Option<String>,
    finished_at: Option<i64>,
    finished_at_rfc3339: Option<String>,
    cancel_requested_at: Option<i64>,
    cancel_requested_at_rfc3339: Option<String>,
}

/// One entry of a job's error history.
#[derive(Debug, Serialize)]
pub struct ErrorView<'a> {
    attempt: i32,
    at: i64,
    at_rfc3339: String,
    error: &'a str,
}

impl<'a> ErrorView<'a> {
    fn of(e: &'a ErrorRecord) -> Self {
        ErrorView {
            attempt: e.attempt,
            at: e.at,
            at_rfc3339: rfc3339(e.at),
            error: &e.error,
        }
    }
}

impl<'a> JobView<'a> {
    /// The view of `j`, its state reported as of `now`.
    pub fn of(j: &'a Job, now: i64) -> anyhow::Result<Self> {
        let opt = |t: Option<i64>| t.map(rfc3339);
        Ok(JobView {
            id: j.id,
            queue: &j.queue,
            kind: j.kind.as_deref(),
            state: j.state,
            reported_state: j.reported_state(now),
            payload: raw(j.id, "payload", &j.payload)?,
            priority: j.priority,
            run_at: j.run_at,
            run_at_rfc3339: rfc3339(j.run_at),
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            lease_token: j.lease_token,
            lease_owner: j.lease_owner.as_deref(),
            lease_expires_at: j.lease_expires_at,
            lease_expires_at_rfc3339: opt(j.lease_expires_at),
            unique_key: j.unique_key.as_deref(),
            errors: j.errors.iter().map(ErrorView::of).collect(),
            result: j
                .result
                .as_deref()
                .map(|r| raw(j.id, "result", r))
                .transpose()?,
            progress: j
                .progress
                .as_deref()
                .map(|p| raw(j.id, "progress", p))
                .transpose()?,
            created_at: j.created_at,
            created_at_rfc3339: rfc3339(j.created_at),
            attempted_at: j.attempted_at,
            attempted_at_rfc3339: opt(j.attempted_at),
            finished_at: j.finished_at,
            finished_at_rfc3339: opt(j.finished_at),
            cancel_requested_at: j.cancel_requested_at,
            cancel_requested_at_rfc3339: opt(j.cancel_requested_at),
        })
    }

    /// The views of a list of jobs.
    pub fn list(jobs: &'a [Job], now: i64) -> anyhow::Result<Vec<Self>> {
        jobs.iter().map(|j| JobView::of(j, now)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc_to_the_microsecond() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339(1_700_000_000_123_456),
            "2023-11-14T22:13:20.123456Z"
        );
    }

    #[test]
    fn stored_json_is_embedded_verbatim() {
        #[derive(Serialize)]
        struct Wrap<'a> {
            payload: &'a RawValue,
        }
        let payload = raw(1, "payload", r#"{"big": 12345678901234567890123}"#).unwrap();
        let out = serde_json::to_string(&Wrap { payload }).unwrap();
        assert_eq!(out, r#"{"payload":{"big": 12345678901234567890123}}"#);
        let e = raw(7, "result", "{nope").unwrap_err().to_string();
        assert!(e.starts_with("job 7: the stored result is not JSON"), "{e}");
    }
}
