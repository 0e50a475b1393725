//! Validated inputs: nothing a user types reaches SQL as text, and bad input is refused before
//! anything changes.

use std::fmt;

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
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(String);

impl QueueName {
    /// Validates a queue name.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        match check_name(&name) {
            Ok(()) => Ok(QueueName(name)),
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
        if text.len() > limit {
            return Err(Error::PayloadTooLarge {
                size: text.len(),
                limit,
            });
        }
        // Parsing into RawValue validates without building a tree.
        if let Err(e) = serde_json::from_str::<&RawValue>(&text) {
            return Err(Error::PayloadInvalid {
                reason: e.to_string(),
            });
        }
        if text.contains("\\u0000") {
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
        Payload::parse(text, limit)
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
    }

    #[test]
    fn unique_keys() {
        assert!(UniqueKey::new("order-1").is_ok());
        assert!(UniqueKey::new("").is_err());
        assert!(UniqueKey::new("k".repeat(256)).is_err());
    }
}
