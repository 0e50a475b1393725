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

/// A validated name of a queue that exists ([`backlog::Client::queue_known`]): an action on a
/// mistyped name is refused and creates nothing.
pub async fn known_queue(client: &backlog::Client, s: &str) -> anyhow::Result<QueueName> {
    let name = queue_name(s)?;
    if !client.queue_known(&name).await? {
        anyhow::bail!(
            "no such queue: {name} (it has no settings and no jobs; `backlog queue list` lists them)"
        );
    }
    Ok(name)
}

/// Validated kinds.
pub fn kinds(v: &[String]) -> anyhow::Result<Vec<Kind>> {
    v.iter().map(|k| Ok(Kind::new(k.as_str())?)).collect()
}
