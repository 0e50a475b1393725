//! Counts per queue and minute (`backlog_stat`) and the operators' actions (`backlog_audit`).

use std::collections::BTreeMap;

use backlog_core::{
    AuditEntry, AuditListParams, DbErrorKind, QueueName, Result, StatCounts, StatDepth, StatRow,
};

use crate::state::{State, check_json};

impl State {
    /// A queue's row of a minute, created empty (no depth sampled) when missing.
    fn stat_row(&mut self, queue: &str, minute: i64) -> &mut StatRow {
        self.stats
            .entry((minute, queue.to_owned()))
            .or_insert_with(|| StatRow {
                queue: queue.to_owned(),
                minute,
                counts: StatCounts::default(),
                depth: None,
            })
    }

    /// `stat_add.sql`: counts added to what is there; the depth is left alone.
    pub fn stat_add(&mut self, rows: &[StatRow]) {
        for r in rows {
            self.stat_row(&r.queue, r.minute).counts.add(&r.counts);
        }
    }

    /// `stat_snapshot.sql`.
    pub fn stat_snapshot(&mut self, minute: i64, depths: &[(String, StatDepth)]) {
        for (queue, depth) in depths {
            self.stat_row(queue, minute).depth = Some(*depth);
        }
    }

    /// `stat_history.sql`: rows of minutes from `since` on, by minute and queue.
    pub fn stat_history(&self, queue: Option<&QueueName>, since: i64) -> Vec<StatRow> {
        self.stats
            .range((since, String::new())..)
            .map(|(_, row)| row)
            .filter(|row| queue.is_none_or(|q| q.as_str() == row.queue))
            .cloned()
            .collect()
    }

    /// `stat_totals.sql`: per queue, the sums over every row, by queue.
    pub fn stat_totals(&self) -> Vec<StatRow> {
        let mut sums: BTreeMap<&str, StatCounts> = BTreeMap::new();
        for row in self.stats.values() {
            sums.entry(&row.queue).or_default().add(&row.counts);
        }
        sums.into_iter()
            .map(|(queue, counts)| StatRow {
                queue: queue.to_owned(),
                minute: 0,
                counts,
                depth: None,
            })
            .collect()
    }

    /// `stat_fold.sql` then `stat_prune.sql`: the minutes before `before` (never minute 0 itself)
    /// added to each queue's row of minute 0 and removed.
    pub fn stat_prune(&mut self, before: i64) -> u64 {
        if before <= 1 {
            return 0;
        }
        let old: Vec<(i64, String)> = self
            .stats
            .range((1, String::new())..(before, String::new()))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &old {
            if let Some(row) = self.stats.remove(key) {
                self.stat_row(&row.queue, 0).counts.add(&row.counts);
            }
        }
        old.len() as u64
    }

    /// `audit_add.sql`: `detail` must be JSON.
    pub fn audit_add(&mut self, entry: &AuditEntry) -> Result<i64> {
        check_json("detail", &entry.detail, DbErrorKind::Other)?;
        // Entries are never deleted, so the next id is never one used before.
        let id = self.audit.last_key_value().map_or(1, |(id, _)| id + 1);
        let entry = AuditEntry {
            id,
            ..entry.clone()
        };
        self.audit.insert(id, entry);
        Ok(id)
    }

    /// `audit_list.sql`: newest first.
    pub fn audit_list(&self, p: &AuditListParams) -> Vec<AuditEntry> {
        self.audit
            .range(..p.before_id)
            .rev()
            .map(|(_, entry)| entry)
            .filter(|e| {
                p.queue
                    .as_ref()
                    .is_none_or(|q| e.queue.as_deref() == Some(q.as_str()))
                    && p.actor.as_ref().is_none_or(|a| &e.actor == a)
                    && p.action.as_ref().is_none_or(|a| &e.action == a)
            })
            .take(p.limit as usize)
            .cloned()
            .collect()
    }
}
