//! What this process did, per queue and minute, until it is added to `backlog_stat`: the counts
//! behind `/metrics` and the dashboard's charts, summed over every process by the database.
//!
//! Recording is a lock and a map update per batch; a task flushes every few seconds (and
//! [`crate::Client::close`] once more), so at most those seconds of counts are lost when a
//! process dies. Counts a flush could not write are kept for the next one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use backlog_core::{Backend, StatCounts, StatRow, minute_of};

/// How often counts are added to the database.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// Counts not yet written, by queue and minute.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pending: Mutex<HashMap<(String, i64), StatCounts>>,
    flusher: std::sync::OnceLock<()>,
}

impl Recorder {
    /// Updates the counts of `queue` in the minute of `now`.
    pub(crate) fn record(&self, queue: &str, now: i64, f: impl FnOnce(&mut StatCounts)) {
        let mut pending = self.pending.lock().expect("lock");
        let key = (queue.to_owned(), minute_of(now));
        f(pending.entry(key).or_default());
    }

    /// Everything recorded so far, taken out.
    pub(crate) fn take(&self) -> Vec<StatRow> {
        let pending = std::mem::take(&mut *self.pending.lock().expect("lock"));
        pending
            .into_iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|((queue, minute), counts)| StatRow {
                queue,
                minute,
                counts,
                depth: None,
            })
            .collect()
    }

    /// Rows a flush could not write, back for the next one.
    pub(crate) fn put_back(&self, rows: Vec<StatRow>) {
        let mut pending = self.pending.lock().expect("lock");
        for r in rows {
            pending
                .entry((r.queue, r.minute))
                .or_default()
                .add(&r.counts);
        }
    }

    /// Starts the flushing task once, when there is a runtime to run it; it ends when the
    /// recorder is dropped (with the client).
    pub(crate) fn start_flusher(self: &Arc<Self>, backend: &Arc<dyn Backend>) {
        if self.flusher.get().is_some() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.flusher.set(()).is_err() {
            return;
        }
        let weak: Weak<Recorder> = Arc::downgrade(self);
        let backend = backend.clone();
        rt.spawn(async move {
            loop {
                tokio::time::sleep(FLUSH_EVERY).await;
                let Some(rec) = weak.upgrade() else { return };
                flush(&rec, &*backend).await.ok();
            }
        });
    }
}

/// Adds what `rec` holds to the database; on failure keeps it for the next flush.
pub(crate) async fn flush(rec: &Recorder, backend: &dyn Backend) -> backlog_core::Result<()> {
    let rows = rec.take();
    if rows.is_empty() {
        return Ok(());
    }
    match backend.stat_add(&rows).await {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::debug!(error = %e, rows = rows.len(), "stats not written; kept for the next flush");
            rec.put_back(rows);
            Err(e)
        }
    }
}
