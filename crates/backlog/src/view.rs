//! The JSON shape of a job, the same for `backlog … --json` and the HTTP API
//! (`docs/cli-json.md`):
//!
//! - JSON the database stores (a job's payload, progress and result) is embedded as JSON, not as
//!   a string holding it, and passed through as stored, so numbers keep every digit.
//! - Every time keeps its field in microseconds since the Unix epoch and has an RFC 3339 UTC
//!   string beside it, named after it with `_rfc3339` added (`run_at` and `run_at_rfc3339`);
//!   both are null when the time is unset.
//!
//! With the `openapi` feature the views describe themselves for an OpenAPI document (utoipa).

use serde::Serialize;
use serde_json::value::RawValue;

use crate::{Error, ErrorRecord, Job, Result};

/// A time in microseconds since the epoch as RFC 3339 UTC, to the microsecond.
pub fn rfc3339(us: i64) -> String {
    humantime::format_rfc3339_micros(system_time(us)).to_string()
}

/// The last microsecond RFC 3339 can write (9999-12-31T23:59:59.999999Z).
const RFC3339_LAST_US: i64 = 253_402_300_799_999_999;

/// A stored time (µs since the epoch) as a `SystemTime` that RFC 3339 can write: a time before
/// the epoch or after the year 9999 (a row written by hand) is shown at the nearest end rather
/// than failing the whole answer.
pub fn system_time(us: i64) -> std::time::SystemTime {
    let us = us.clamp(0, RFC3339_LAST_US) as u64;
    std::time::UNIX_EPOCH + std::time::Duration::from_micros(us)
}

/// Stored JSON text as JSON, verbatim.
pub fn raw_json(job: i64, what: &str, text: &str) -> Result<Box<RawValue>> {
    RawValue::from_string(text.to_owned()).map_err(|e| Error::PayloadInvalid {
        reason: format!("job {job}: the stored {what} is not JSON: {e}"),
    })
}

/// A job as `job show`, `job list`, `dead list` and the HTTP API give it.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobView {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: Option<String>,
    /// The stored state: available, running, completed, dead, cancelled or held.
    pub state: String,
    /// The state as people read it: `scheduled` or `retrying` for available jobs not yet due.
    pub reported_state: &'static str,
    /// The payload.
    #[cfg_attr(feature = "openapi", schema(value_type = serde_json::Value))]
    pub payload: Box<RawValue>,
    /// Lower runs first.
    pub priority: i16,
    /// When it may run next (µs).
    pub run_at: i64,
    /// When it may run next.
    pub run_at_rfc3339: String,
    /// Attempts made so far.
    pub attempt: i32,
    /// Its own max attempts (else the queue's).
    pub max_attempts: Option<i32>,
    /// The current lease token, while running.
    pub lease_token: Option<i64>,
    /// The worker holding the lease.
    pub lease_owner: Option<String>,
    /// When the lease runs out (µs).
    pub lease_expires_at: Option<i64>,
    /// When the lease runs out.
    pub lease_expires_at_rfc3339: Option<String>,
    /// Its unique key.
    pub unique_key: Option<String>,
    /// Its ordered group.
    pub group: Option<String>,
    /// Failed attempts, oldest first.
    pub errors: Vec<ErrorView>,
    /// The handler's result.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<serde_json::Value>))]
    pub result: Option<Box<RawValue>>,
    /// The handler's progress.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<serde_json::Value>))]
    pub progress: Option<Box<RawValue>>,
    /// When it was enqueued (µs).
    pub created_at: i64,
    /// When it was enqueued.
    pub created_at_rfc3339: String,
    /// When its last attempt started (µs).
    pub attempted_at: Option<i64>,
    /// When its last attempt started.
    pub attempted_at_rfc3339: Option<String>,
    /// When it finished (µs).
    pub finished_at: Option<i64>,
    /// When it finished.
    pub finished_at_rfc3339: Option<String>,
    /// When cancellation of the running job was asked for (µs).
    pub cancel_requested_at: Option<i64>,
    /// When cancellation was asked for.
    pub cancel_requested_at_rfc3339: Option<String>,
    /// The W3C `traceparent` of the span that enqueued it, if it was traced.
    pub traceparent: Option<String>,
    /// The W3C `tracestate` that came with it, if any.
    pub tracestate: Option<String>,
    /// Moved to the archive by retention `archive`: finished for good, no action changes it.
    pub archived: bool,
    /// Its parents not yet ended: a waiting job with some waits for them (0 for one that waits
    /// for no other job).
    pub deps_left: i32,
}

/// One failed attempt.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorView {
    /// The attempt that failed.
    pub attempt: i32,
    /// When (µs).
    pub at: i64,
    /// When.
    pub at_rfc3339: String,
    /// The error text.
    pub error: String,
}

impl ErrorView {
    fn of(e: &ErrorRecord) -> Self {
        ErrorView {
            attempt: e.attempt,
            at: e.at,
            at_rfc3339: rfc3339(e.at),
            error: e.error.clone(),
        }
    }
}

impl JobView {
    /// The view of `j`, its state reported as of `now`.
    pub fn of(j: &Job, now: i64) -> Result<Self> {
        let opt = |t: Option<i64>| t.map(rfc3339);
        Ok(JobView {
            id: j.id,
            queue: j.queue.clone(),
            kind: j.kind.clone(),
            state: j.state.as_str().to_owned(),
            reported_state: j.reported_state(now),
            payload: raw_json(j.id, "payload", &j.payload)?,
            priority: j.priority,
            run_at: j.run_at,
            run_at_rfc3339: rfc3339(j.run_at),
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            lease_token: j.lease_token,
            lease_owner: j.lease_owner.clone(),
            lease_expires_at: j.lease_expires_at,
            lease_expires_at_rfc3339: opt(j.lease_expires_at),
            unique_key: j.unique_key.clone(),
            group: j.group.clone(),
            errors: j.errors.iter().map(ErrorView::of).collect(),
            result: j
                .result
                .as_deref()
                .map(|r| raw_json(j.id, "result", r))
                .transpose()?,
            progress: j
                .progress
                .as_deref()
                .map(|p| raw_json(j.id, "progress", p))
                .transpose()?,
            created_at: j.created_at,
            created_at_rfc3339: rfc3339(j.created_at),
            attempted_at: j.attempted_at,
            attempted_at_rfc3339: opt(j.attempted_at),
            finished_at: j.finished_at,
            finished_at_rfc3339: opt(j.finished_at),
            cancel_requested_at: j.cancel_requested_at,
            cancel_requested_at_rfc3339: opt(j.cancel_requested_at),
            traceparent: j.trace_context.as_ref().map(|t| t.traceparent().to_owned()),
            tracestate: j
                .trace_context
                .as_ref()
                .and_then(|t| t.tracestate().map(str::to_owned)),
            archived: j.archived,
            deps_left: j.deps_left,
        })
    }

    /// The views of a list of jobs.
    pub fn list(jobs: &[Job], now: i64) -> Result<Vec<Self>> {
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
        struct Wrap {
            payload: Box<RawValue>,
        }
        let payload = raw_json(1, "payload", r#"{"big": 12345678901234567890123}"#).unwrap();
        let out = serde_json::to_string(&Wrap { payload }).unwrap();
        assert_eq!(out, r#"{"payload":{"big": 12345678901234567890123}}"#);
        let e = raw_json(7, "result", "{nope").unwrap_err().to_string();
        assert!(e.contains("job 7: the stored result is not JSON"), "{e}");
    }
}
