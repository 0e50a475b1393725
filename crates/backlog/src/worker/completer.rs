//! Batched completion: one statement for many finished jobs.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use super::run::Counters;
use crate::{ClaimedJob, Client};

/// Queues finished jobs and completes them in batches.
#[derive(Clone)]
pub(crate) struct Completer {
    tx: mpsc::UnboundedSender<ClaimedJob>,
    done: Arc<tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Completer {
    pub fn start(client: Arc<Client>, batch: usize, counters: Arc<Counters>) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<ClaimedJob>();
        let batch = batch.max(1);
        let handle = tokio::spawn(async move {
            let mut buf = Vec::with_capacity(batch);
            while rx.recv_many(&mut buf, batch).await > 0 {
                let mut attempt = 0;
                loop {
                    match client.complete_many(&buf).await {
                        Ok(done) => {
                            counters
                                .completed
                                .fetch_add(done.len() as u64, Ordering::Relaxed);
                            let lost = buf.len() - done.len();
                            if lost > 0 {
                                counters.lost.fetch_add(lost as u64, Ordering::Relaxed);
                                tracing::warn!(
                                    "{lost} finished job(s) had lost their lease; not completed"
                                );
                            }
                            break;
                        }
                        Err(e) if e.is_transient() && attempt < 20 => {
                            attempt += 1;
                            tracing::warn!("completing {} job(s) failed, retrying: {e}", buf.len());
                            tokio::time::sleep(std::time::Duration::from_millis(50 * attempt))
                                .await;
                        }
                        Err(e) => {
                            tracing::error!("completing {} job(s) failed: {e}", buf.len());
                            break;
                        }
                    }
                }
                buf.clear();
            }
        });
        Completer {
            tx,
            done: Arc::new(tokio::sync::Mutex::new(Some(handle))),
        }
    }

    /// Queues a finished job for completion.
    pub fn push(&self, job: ClaimedJob) {
        if self.tx.send(job).is_err() {
            tracing::error!("completer stopped; a finished job was not completed");
        }
    }

    /// Flushes what is queued and stops (call once every pusher is done).
    pub async fn close(self) {
        let Completer { tx, done } = self;
        drop(tx);
        let handle = done.lock().await.take();
        if let Some(h) = handle {
            let _ = h.await;
        }
    }
}
