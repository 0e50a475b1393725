//! Batched completion: one statement for many finished jobs.
//!
//! An executor keeps its concurrency slot until its job's completion is committed, so a process
//! that dies leaves at most `concurrency` jobs per queue to run again: the ones running and the
//! ones finished but not yet recorded, together.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, oneshot};

use super::run::Counters;
use crate::{ClaimedJob, Client};

/// Times the completer yields to let more finished jobs arrive before it writes.
const COALESCE_YIELDS: usize = 4;

/// Queues finished jobs and completes them in batches.
#[derive(Clone)]
pub(crate) struct Completer {
    tx: mpsc::UnboundedSender<(ClaimedJob, oneshot::Sender<bool>)>,
    done: Arc<tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Completer {
    pub fn start(client: Arc<Client>, batch: usize, counters: Arc<Counters>) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<(ClaimedJob, oneshot::Sender<bool>)>();
        let batch = batch.max(1);
        let handle = tokio::spawn(async move {
            let mut buf = Vec::with_capacity(batch);
            while rx.recv_many(&mut buf, batch).await > 0 {
                // The jobs of one claimed batch finish together: let the rest of them land, so
                // that one statement completes them all instead of one for the first and another
                // for the others.
                for _ in 0..COALESCE_YIELDS {
                    if buf.len() >= batch {
                        break;
                    }
                    tokio::task::yield_now().await;
                    while buf.len() < batch
                        && let Ok(j) = rx.try_recv()
                    {
                        buf.push(j);
                    }
                }
                let (jobs, acks): (Vec<ClaimedJob>, Vec<oneshot::Sender<bool>>) =
                    buf.drain(..).unzip();
                let mut attempt = 0;
                let mut completed = vec![];
                loop {
                    match client.complete_many(&jobs).await {
                        Ok(done) => {
                            completed = done.iter().map(|r| r.id).collect();
                            counters
                                .completed
                                .fetch_add(done.len() as u64, Ordering::Relaxed);
                            let lost = jobs.len() - done.len();
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
                            tracing::warn!(
                                "completing {} job(s) failed, retrying: {e}",
                                jobs.len()
                            );
                            tokio::time::sleep(std::time::Duration::from_millis(50 * attempt))
                                .await;
                        }
                        Err(e) => {
                            tracing::error!("completing {} job(s) failed: {e}", jobs.len());
                            break;
                        }
                    }
                }
                for (job, ack) in jobs.iter().zip(acks) {
                    let _ = ack.send(completed.contains(&job.id));
                }
            }
        });
        Completer {
            tx,
            done: Arc::new(tokio::sync::Mutex::new(Some(handle))),
        }
    }

    /// Completes a finished job in the next batch; true once it is committed, false when its
    /// lease was lost or the completion failed.
    pub async fn complete(&self, job: ClaimedJob) -> bool {
        let (ack, done) = oneshot::channel();
        if self.tx.send((job, ack)).is_err() {
            tracing::error!("completer stopped; a finished job was not completed");
            return false;
        }
        done.await.unwrap_or(false)
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
