//! Validated inputs: nothing a user types reaches SQL as text, and bad input is refused before
//! anything changes.

use std::fmt;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::{Error, Result};

/// Longest accepted queue name or kind, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// Longest accepted unique key, in bytes.
pub const MAX_UNIQUE_KEY_LEN: usize = 255;
/// Default payload limit: 1 MiB.
pub const DEFAULT_PAYLOAD_LIMIT: usize = 1024 * 1024;

fn check_name(s: &str) -> std::result::Result<(), &'static str> {
    if s.is_empty() {
        return Err("must not be empty");
    }
    if s.len() > MAX_NAME_LEN {
        return Err("must be at most 128 characters");
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
    {
        return Err("only letters, digits and _ - . : are allowed");
    }
    Ok(())
}

/// A queue name: 1 to 128 characters from `[A-Za-z0-9_.:-]`.
///
/// # Example
/// ```
/// use backlog_core::QueueName;
/// assert!(QueueName::new("emails").is_ok());
/// assert!(QueueName::new("x'; DROP TABLE backlog_job; --").is_err());
/// ```
///
/// Shared, not copied: a clone is a reference count, and two clones compare equal by pointer
/// before any byte is read (a batch of jobs for one queue compares each job's queue).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(Arc<str>);

impl QueueName {
    /// Validates a queue name.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        match check_name(&name) {
            Ok(()) => Ok(QueueName(name.into())),
            Err(reason) => Err(Error::QueueNameInvalid { name, reason }),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for QueueName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        QueueName::new(s)
    }
}

/// A job kind (the name handlers are registered under): same rules as a queue name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind(String);

impl Kind {
    /// Validates a kind.
    pub fn new(kind: impl Into<String>) -> Result<Self> {
        let kind = kind.into();
        match check_name(&kind) {
            Ok(()) => Ok(Kind(kind)),
            Err(reason) => Err(Error::KindInvalid { kind, reason }),
        }
    }

    /// The kind.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Kind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Kind::new(s)
    }
}

/// A unique key: 1 to 255 bytes, any characters (always bound, never formatted into SQL).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UniqueKey(String);

impl UniqueKey {
    /// Validates a unique key.
    pub fn new(key: impl Into<String>) -> Result<Self> {
        let key = key.into();
        if key.is_empty() {
            return Err(Error::UniqueKeyInvalid {
                reason: "must not be empty",
            });
        }
        if key.len() > MAX_UNIQUE_KEY_LEN {
            return Err(Error::UniqueKeyInvalid {
                reason: "must be at most 255 bytes",
            });
        }
        if key.contains('\0') {
            return Err(Error::UniqueKeyInvalid {
                reason: "must not contain NUL",
            });
        }
        Ok(UniqueKey(key))
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A group key (a customer, an account, a document): jobs of one queue with the same key run
/// in enqueue order, at most the queue's group concurrency at a time. 1 to 255 bytes, any
/// characters but NUL (always bound, never formatted into SQL).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey(String);

impl GroupKey {
    /// Validates a group key.
    pub fn new(key: impl Into<String>) -> Result<Self> {
        let key = key.into();
        let reason = if key.is_empty() {
            "must not be empty"
        } else if key.len() > MAX_UNIQUE_KEY_LEN {
            "must be at most 255 bytes"
        } else if key.contains('\0') {
            "must not contain NUL"
        } else {
            return Ok(GroupKey(key));
        };
        Err(Error::GroupKeyInvalid { reason })
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether JSON text holds a NUL character: JSON can only write one as the escape `\u0000`, which
/// counts when the backslash before `u` is not itself escaped (`"\\u0000"` is a backslash and
/// the text `u0000`).
fn has_nul_escape(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find("\\u0000").map(|i| i + from) {
        let backslashes = bytes[..=at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if !backslashes.is_multiple_of(2) {
            return true;
        }
        from = at + 1;
    }
    false
}

/// A JSON payload that was checked to parse and to fit the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload(String);

impl Payload {
    /// Checks that `text` is one valid JSON value of at most `limit` bytes.
    ///
    /// # Example
    /// ```
    /// use backlog_core::{Payload, DEFAULT_PAYLOAD_LIMIT};
    /// assert!(Payload::parse(r#"{"to":"a@example.com"}"#, DEFAULT_PAYLOAD_LIMIT).is_ok());
    /// assert!(Payload::parse("{not json", DEFAULT_PAYLOAD_LIMIT).is_err());
    /// ```
    pub fn parse(text: impl Into<String>, limit: usize) -> Result<Self> {
        let text = text.into();
        if text.len() <= limit
            && let Err(e) = serde_json::from_str::<&RawValue>(&text)
        {
            // Parsing into RawValue validates without building a tree.
            return Err(Error::PayloadInvalid {
                reason: e.to_string(),
            });
        }
        Payload::checked(text, limit)
    }

    /// The checks beside JSON syntax: size, and no NUL.
    fn checked(text: String, limit: usize) -> Result<Self> {
        if text.len() > limit {
            return Err(Error::PayloadTooLarge {
                size: text.len(),
                limit,
            });
        }
        if has_nul_escape(&text) {
            // PostgreSQL's jsonb cannot store NUL; refuse it everywhere for identical behaviour.
            return Err(Error::PayloadInvalid {
                reason: "\\u0000 is not allowed in payloads".into(),
            });
        }
        Ok(Payload(text))
    }

    /// Serializes a value as a payload.
    pub fn from_value<T: serde::Serialize + ?Sized>(value: &T, limit: usize) -> Result<Self> {
        let text = serde_json::to_string(value).map_err(|e| Error::PayloadInvalid {
            reason: e.to_string(),
        })?;
        // serde_json writes only valid JSON (raw values included: a RawValue is checked when it
        // is made), so the text is not parsed again; size and NUL are still checked.
        Payload::checked(text, limit)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The JSON text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        assert!(QueueName::new("a").is_ok());
        assert!(QueueName::new("mail.high:v2_x-y").is_ok());
        assert!(QueueName::new("x".repeat(128)).is_ok());
        for bad in ["", "with space", "quote'", "semi;", "ünï", "a/b"] {
            assert!(QueueName::new(bad).is_err(), "{bad:?} accepted");
        }
        let e = QueueName::new("x".repeat(129)).unwrap_err();
        assert!(e.to_string().contains("at most 128"), "{e}");
    }

    #[test]
    fn payloads() {
        assert!(Payload::parse("1", 10).is_ok());
        assert!(Payload::parse("[1,2]", 10).is_ok());
        let e = Payload::parse("[1,2,3,4,5,6]", 10).unwrap_err();
        assert!(matches!(
            e,
            Error::PayloadTooLarge {
                size: 13,
                limit: 10
            }
        ));
        assert!(Payload::parse("", 10).is_err());
        assert!(Payload::parse("{} {}", 10).is_err());
        assert!(Payload::parse(r#""\u0000""#, 10).is_err());
        assert!(Payload::parse(r#""\\\u0000""#, 10).is_err());
        // An escaped backslash, then the text u0000: no NUL.
        assert!(Payload::parse(r#""\\u0000""#, 10).is_ok());
    }

    #[test]
    fn payloads_from_values() {
        let p = Payload::from_value(&serde_json::json!({"a": [1, "b"]}), 100).unwrap();
        assert_eq!(p.as_str(), r#"{"a":[1,"b"]}"#);
        // Not parsed again, but still held to the limit and refused with NUL.
        assert!(matches!(
            Payload::from_value(&"x".repeat(20), 10),
            Err(Error::PayloadTooLarge {
                size: 22,
                limit: 10
            })
        ));
        assert!(matches!(
            Payload::from_value("a\0b", 100),
            Err(Error::PayloadInvalid { .. })
        ));
        // A map whose keys are not strings has no JSON form.
        let m: std::collections::BTreeMap<(i32, i32), i32> = [((1, 2), 3)].into();
        assert!(matches!(
            Payload::from_value(&m, 100),
            Err(Error::PayloadInvalid { .. })
        ));
    }

    #[test]
    fn queue_names_are_shared() {
        let a = QueueName::new("mail").unwrap();
        let b = a.clone();
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        let c = QueueName::new("mail").unwrap();
        assert_eq!(a, c);
        assert_ne!(a, QueueName::new("mail2").unwrap());
        let set: std::collections::HashSet<QueueName> = [a, b, c].into();
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn unique_keys() {
        assert!(UniqueKey::new("order-1").is_ok());
        assert!(UniqueKey::new("").is_err());
        assert!(UniqueKey::new("k".repeat(256)).is_err());
        assert!(GroupKey::new("customer-7").is_ok());
        assert!(GroupKey::new("").is_err());
        assert!(GroupKey::new("g".repeat(256)).is_err());
        assert!(GroupKey::new("a\0b").is_err());
    }
}
