//! Queue settings, the counts per queue, and topics: `backlog_queue`, `backlog_subscription`.

use std::collections::BTreeMap;
use std::time::Duration;

use backlog_core::{JobState, QueueInfo, QueueName, QueueSettings, QueueStats, Result};

use crate::state::{State, check_violation};

/// Settings as `backlog_queue` stores them: its CHECK constraints hold, and durations are kept
/// in whole milliseconds (what reads back from the SQL backends too).
fn stored(s: &QueueSettings) -> Result<QueueSettings> {
    let ms = |d: Duration| d.as_millis() as i64;
    let checks = [
        ("max_attempts >= 1", i64::from(s.max_attempts) >= 1),
        ("backoff_base_ms >= 0", ms(s.backoff_base) >= 0),
        ("backoff_max_ms >= 0", ms(s.backoff_max) >= 0),
        ("lease_ms >= 1", ms(s.lease) >= 1),
        (
            "concurrency >= 1",
            s.concurrency.is_none_or(|c| c as i32 >= 1),
        ),
        (
            "global_concurrency >= 1",
            s.global_concurrency.is_none_or(|c| c as i32 >= 1),
        ),
        ("group_concurrency >= 1", s.group_concurrency as i32 >= 1),
        (
            "rate_limit >= 1",
            s.rate_limit.is_none_or(|r| r.starts as i32 >= 1),
        ),
        (
            "rate_period_ms >= 1",
            s.rate_limit.is_none_or(|r| ms(r.period) >= 1),
        ),
        (
            "group_rate_limit >= 1",
            s.group_rate_limit.is_none_or(|r| r.starts as i32 >= 1),
        ),
        (
            "group_rate_period_ms >= 1",
            s.group_rate_limit.is_none_or(|r| ms(r.period) >= 1),
        ),
        (
            "shards BETWEEN 1 AND 256",
            (1..=QueueSettings::MAX_SHARDS).contains(&s.shards),
        ),
    ];
    if let Some((check, _)) = checks.iter().find(|(_, ok)| !ok) {
        return Err(check_violation(format!("{check} (queue {})", s.name)));
    }
    let whole = |d: Duration| Duration::from_millis(ms(d) as u64);
    Ok(QueueSettings {
        backoff_base: whole(s.backoff_base),
        backoff_max: whole(s.backoff_max),
        lease: whole(s.lease),
        ..s.clone()
    })
}

impl State {
    /// `queue_get.sql`.
    pub fn queue_get(&self, name: &QueueName) -> Option<QueueSettings> {
        self.queues.get(name.as_str()).cloned()
    }

    /// The stored settings of a queue, created with defaults when it has none.
    fn queue_row(&mut self, name: &QueueName) -> &mut QueueSettings {
        self.queues
            .entry(name.as_str().to_owned())
            .or_insert_with(|| QueueSettings::defaults(name.clone()))
    }

    /// `queue_ensure.sql`.
    pub fn queue_ensure(&mut self, name: &QueueName) {
        self.queue_row(name);
    }

    /// `queue_upsert.sql`.
    pub fn queue_upsert(&mut self, settings: &QueueSettings) -> Result<()> {
        let settings = stored(settings)?;
        self.queues
            .insert(settings.name.as_str().to_owned(), settings);
        Ok(())
    }

    /// `queue_set_paused.sql`.
    pub fn queue_set_paused(&mut self, name: &QueueName, paused: bool) {
        self.queue_row(name).paused = paused;
    }

    /// `queue_all.sql` and `queue_pending.sql`: queues with settings or with jobs, by name.
    pub fn queue_list(&self) -> Vec<QueueInfo> {
        let mut out: BTreeMap<&str, QueueInfo> = self
            .queues
            .iter()
            .map(|(name, settings)| {
                let info = QueueInfo {
                    settings: settings.clone(),
                    pending: 0,
                };
                (name.as_str(), info)
            })
            .collect();
        for job in self.jobs.rows() {
            if !out.contains_key(job.queue.as_str()) {
                // Jobs of a queue with no settings stored: defaults apply.
                let Ok(name) = QueueName::new(job.queue.as_str()) else {
                    continue;
                };
                let settings = QueueSettings::defaults(name);
                out.insert(
                    &job.queue,
                    QueueInfo {
                        settings,
                        pending: 0,
                    },
                );
            }
            if let Some(info) = out.get_mut(job.queue.as_str())
                && matches!(
                    job.state,
                    JobState::Available | JobState::Running | JobState::Held
                )
            {
                info.pending += 1;
            }
        }
        out.into_values().collect()
    }

    /// `queue_stats.sql`: counts per queue and reported state, of one queue or of all (those
    /// with settings listed even when empty), by name.
    pub fn queue_stats(&self, queue: Option<&QueueName>, now: i64) -> Vec<(String, QueueStats)> {
        let wanted = |name: &str| queue.is_none_or(|q| q.as_str() == name);
        let mut out: BTreeMap<String, QueueStats> = match queue {
            Some(q) => BTreeMap::from([(q.as_str().to_owned(), QueueStats::default())]),
            None => self
                .queues
                .keys()
                .map(|name| (name.clone(), QueueStats::default()))
                .collect(),
        };
        for job in self.jobs.rows().filter(|j| wanted(&j.queue)) {
            let stats = out.entry(job.queue.clone()).or_default();
            stats.add(job.state, job.due(now), 1);
        }
        for job in self.jobs.archive_rows().filter(|j| wanted(&j.queue)) {
            out.entry(job.queue.clone()).or_default().archived += 1;
        }
        out.into_iter().collect()
    }

    /// `queue_oldest_due.sql`.
    pub fn queue_oldest_due(&self, now: i64) -> Vec<(String, i64)> {
        self.jobs.oldest_due(now)
    }

    /// `topic_subscribe.sql`, `topic_unsubscribe.sql`.
    pub fn topic_subscribe(&mut self, topic: &QueueName, queue: &QueueName, subscribe: bool) {
        let row = (topic.as_str().to_owned(), queue.as_str().to_owned());
        if subscribe {
            self.topics.insert(row);
        } else {
            self.topics.remove(&row);
        }
    }

    /// `topic_subscribers.sql`: by name.
    pub fn topic_subscribers(&self, topic: &QueueName) -> Result<Vec<QueueName>> {
        self.topics
            .iter()
            .filter(|(t, _)| t == topic.as_str())
            .map(|(_, queue)| QueueName::new(queue.as_str()))
            .collect()
    }
}
