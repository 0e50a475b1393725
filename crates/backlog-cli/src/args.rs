//! What several commands check in what a user typed: durations, queue names and kinds, with
//! the library's own messages.

use std::time::Duration;

use backlog::{Kind, QueueName};

/// A duration such as `30s` or `5m`, for clap.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    backlog::parse_duration(s).map_err(|e| e.to_string())
}

/// A validated queue name, with the library's message on error.
pub fn queue_name(s: &str) -> anyhow::Result<QueueName> {
    Ok(QueueName::new(s)?)
}

/// Validated kinds.
pub fn kinds(v: &[String]) -> anyhow::Result<Vec<Kind>> {
    v.iter().map(|k| Ok(Kind::new(k.as_str())?)).collect()
}
