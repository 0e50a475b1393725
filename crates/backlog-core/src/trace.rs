//! The W3C trace context a job carries from the code that enqueued it to the handler that runs
//! it (<https://www.w3.org/TR/trace-context/>): a job enqueued inside a traced request is run in
//! a span of the same trace.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Longest accepted `tracestate`, in bytes (the W3C limit is 32 members of at most 256 bytes,
/// and a vendor may truncate; 512 keeps the stored column small).
pub const MAX_TRACESTATE_LEN: usize = 512;

/// A validated W3C trace context: a `traceparent` (`00-<trace id>-<parent id>-<flags>`, lower
/// case hex) and an optional `tracestate`. Stored with the job as JSON, `{"traceparent": …,
/// "tracestate": …}` (the carrier a propagator reads), in the `trace_context` column.
///
/// # Example
/// ```
/// use backlog_core::TraceContext;
/// let tc = TraceContext::new("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None)?;
/// assert_eq!(tc.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert!(tc.sampled());
/// assert!(TraceContext::new("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None).is_err());
/// # Ok::<(), backlog_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    traceparent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracestate: Option<String>,
}

impl TraceContext {
    /// Validates a `traceparent` and an optional `tracestate`. Only version `00` is accepted (a
    /// later version's first four fields are read as version 00's, as the W3C asks, and the
    /// rest dropped); trace and parent ids must not be all zeros.
    pub fn new(traceparent: &str, tracestate: Option<&str>) -> Result<Self> {
        let invalid = |reason| Error::TraceContextInvalid { reason };
        let tp = traceparent.trim();
        let fields: Vec<&str> = tp.splitn(5, '-').collect();
        let [version, trace_id, parent_id, flags, rest @ ..] = fields.as_slice() else {
            return Err(invalid(
                "traceparent must be 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>",
            ));
        };
        let hex = |s: &str, len| {
            s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        if !hex(version, 2) || *version == "ff" {
            return Err(invalid(
                "traceparent version must be two lower-case hex digits, not ff",
            ));
        }
        if *version == "00" && !rest.is_empty() {
            return Err(invalid("a version 00 traceparent has exactly four fields"));
        }
        if !hex(trace_id, 32) || trace_id.bytes().all(|b| b == b'0') {
            return Err(invalid(
                "trace id must be 32 lower-case hex digits, not all zero",
            ));
        }
        if !hex(parent_id, 16) || parent_id.bytes().all(|b| b == b'0') {
            return Err(invalid(
                "parent id must be 16 lower-case hex digits, not all zero",
            ));
        }
        if !hex(flags, 2) {
            return Err(invalid("trace flags must be two lower-case hex digits"));
        }
        let tracestate = match tracestate.map(str::trim) {
            None | Some("") => None,
            Some(s) if s.len() > MAX_TRACESTATE_LEN => {
                return Err(invalid("tracestate must be at most 512 bytes"));
            }
            Some(s) if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) => {
                return Err(invalid("tracestate must be printable ASCII"));
            }
            Some(s) => Some(s.to_owned()),
        };
        Ok(TraceContext {
            traceparent: format!("00-{trace_id}-{parent_id}-{flags}"),
            tracestate,
        })
    }

    /// The `traceparent` header value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The parent span's id (16 hex digits): the span that enqueued the job.
    pub fn parent_id(&self) -> &str {
        &self.traceparent[36..52]
    }

    /// The trace flags byte.
    pub fn flags(&self) -> u8 {
        u8::from_str_radix(&self.traceparent[53..55], 16).unwrap_or(0)
    }

    /// Whether the caller sampled the trace.
    pub fn sampled(&self) -> bool {
        self.flags() & 1 == 1
    }

    /// The stored form: JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("two strings serialize")
    }

    /// Reads the stored form. A stored value that does not parse or validate (written by hand,
    /// or by another program) reads as none: a job never fails for its trace context.
    pub fn from_json(text: &str) -> Option<Self> {
        let raw: TraceContext = serde_json::from_str(text).ok()?;
        TraceContext::new(&raw.traceparent, raw.tracestate.as_deref()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn accepts_and_reads_a_traceparent() {
        let tc = TraceContext::new(TP, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(tc.traceparent(), TP);
        assert_eq!(tc.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tc.parent_id(), "00f067aa0ba902b7");
        assert_eq!(tc.flags(), 1);
        assert_eq!(tc.tracestate(), Some("congo=t61rcWkgMzE"));
        let back = TraceContext::from_json(&tc.to_json()).unwrap();
        assert_eq!(back, tc);
        assert_eq!(TraceContext::new(TP, Some("")).unwrap().tracestate(), None);
    }

    #[test]
    fn a_later_version_is_read_as_00() {
        let tc = TraceContext::new(
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what",
            None,
        )
        .unwrap();
        assert_eq!(tc.traceparent(), TP);
    }

    #[test]
    fn refuses_malformed_contexts() {
        for bad in [
            "",
            "00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert!(
                matches!(
                    TraceContext::new(bad, None),
                    Err(Error::TraceContextInvalid { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(TraceContext::new(TP, Some(&"a".repeat(513))).is_err());
        assert!(TraceContext::new(TP, Some("a=\u{7}")).is_err());
        assert_eq!(TraceContext::from_json("{\"traceparent\":\"00-x\"}"), None);
        assert_eq!(TraceContext::from_json("not json"), None);
    }
}
