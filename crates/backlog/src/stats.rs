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

/// Tries of the last flush when a process closes (a Galera certification conflict or a
/// deadlock on a counts row that another process writes too is normal, and passes).
const LAST_FLUSH_TRIES: u32 = 5;

/// The last flush, when the client closes: transient failures are tried again after a short
/// pause, quietly; only counts that could not be written in the end are worth a warning.
pub(crate) async fn flush_last(rec: &Recorder, backend: &dyn Backend) -> backlog_core::Result<()> {
    retry_transient(LAST_FLUSH_TRIES, || flush(rec, backend)).await
}

/// Runs `call` up to `tries` times while it fails for a transient reason, 20 ms more between
/// each try.
async fn retry_transient<F, Fut>(tries: u32, mut call: F) -> backlog_core::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = backlog_core::Result<()>>,
{
    let mut tried = 1;
    loop {
        match call().await {
            Err(e) if e.is_transient() && tried < tries => {
                tokio::time::sleep(Duration::from_millis(20 * u64::from(tried))).await;
                tried += 1;
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod last_flush_tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use backlog_core::{DbErrorKind, Error};

    use super::*;

    fn deadlock() -> Error {
        Error::Database {
            kind: DbErrorKind::Deadlock,
            source: "1213 Deadlock found".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_flush_gets_past_a_deadlock_quietly_and_gives_up_on_others() {
        let calls = AtomicU32::new(0);
        let once = retry_transient(5, || async {
            match calls.fetch_add(1, Ordering::Relaxed) {
                0 => Err(deadlock()),
                _ => Ok(()),
            }
        });
        assert!(once.await.is_ok());
        assert_eq!(calls.load(Ordering::Relaxed), 2);

        calls.store(0, Ordering::Relaxed);
        let always = retry_transient(5, || async {
            calls.fetch_add(1, Ordering::Relaxed);
            Err(deadlock())
        });
        assert!(always.await.is_err());
        assert_eq!(calls.load(Ordering::Relaxed), 5);

        calls.store(0, Ordering::Relaxed);
        let fatal = retry_transient(5, || async {
            calls.fetch_add(1, Ordering::Relaxed);
            Err(Error::Unsupported("no"))
        });
        assert!(fatal.await.is_err());
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }
}
