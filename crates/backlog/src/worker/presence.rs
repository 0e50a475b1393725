//! The worker's registration (`backlog_worker`): written when a run starts and at every
//! [`BEAT`], deleted when it stops, so that operators see which processes work which queues
//! (`backlog workers`, `GET /api/v1/workers`, the dashboard's Workers page). A worker killed or
//! cut off leaves its row, which expires [`TTL`] after its last beat; expired rows are deleted
//! by any worker's beat an hour later.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::heartbeat::InFlightMap;
use crate::{Client, WorkerRegistration};

/// How often a worker writes its registration.
const BEAT: Duration = Duration::from_secs(5);

/// A registration not written again for this long is a worker that stopped without saying so.
pub(crate) const TTL: Duration = Duration::from_secs(30);

/// Expired registrations are kept this long (shown as expired), then deleted.
const KEEP_EXPIRED: Duration = Duration::from_secs(3600);

/// Every this many beats, a worker deletes the registrations expired for [`KEEP_EXPIRED`].
const PRUNE_EVERY: u64 = 12;

/// The registration of a run of a worker with these queues (name, concurrency) and lease owner.
pub(crate) fn registration(
    owner: &str,
    queues: &[(crate::QueueName, usize)],
    now: i64,
) -> WorkerRegistration {
    let queues: Vec<serde_json::Value> = queues
        .iter()
        .map(|(q, n)| serde_json::json!({"queue": q.as_str(), "concurrency": n}))
        .collect();
    WorkerRegistration {
        id: format!("{owner}:{:08x}", rand::random::<u32>()),
        host: owner.rsplit_once(':').map_or(owner, |(h, _)| h).to_owned(),
        pid: i64::from(std::process::id()),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        queues: serde_json::Value::Array(queues).to_string(),
        running: 0,
        started_at: now,
        seen_at: now,
        expires_at: now,
    }
}

/// Writes `reg` now and every [`BEAT`] with the jobs in flight, until `stop`; then deletes it.
/// A failed write is logged (once a minute at most) and tried again at the next beat: the
/// registration is for operators, and never stops the worker.
pub(crate) async fn run(
    client: std::sync::Arc<Client>,
    mut reg: WorkerRegistration,
    inflight: InFlightMap,
    stop: CancellationToken,
) {
    let ttl = TTL.as_micros() as i64;
    let mut beats = 0u64;
    let mut warned_at: Option<std::time::Instant> = None;
    loop {
        let now = client.now();
        reg.running = inflight.lock().expect("lock").len() as i64;
        reg.seen_at = now;
        reg.expires_at = now + ttl;
        let backend = client.backend();
        let mut wrote = backend.worker_beat(&reg).await;
        if wrote.is_ok() && beats.is_multiple_of(PRUNE_EVERY) {
            let before = now - KEEP_EXPIRED.as_micros() as i64;
            wrote = backend.worker_prune(before).await.map(drop);
        }
        if let Err(e) = wrote
            && warned_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(60))
        {
            warned_at = Some(std::time::Instant::now());
            tracing::warn!("could not write this worker's registration (backlog_worker): {e}");
        }
        beats += 1;
        tokio::select! {
            _ = tokio::time::sleep(BEAT) => {}
            _ = stop.cancelled() => break,
        }
    }
    if let Err(e) = client.backend().worker_gone(&reg.id).await {
        tracing::debug!("could not delete this worker's registration: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_names_its_queues_host_and_process() {
        let q = |n: &str| crate::QueueName::new(n).unwrap();
        let r = registration("box-1:4242", &[(q("emails"), 10), (q("reports"), 2)], 7);
        assert!(r.id.starts_with("box-1:4242:"), "{}", r.id);
        assert_eq!(r.host, "box-1");
        assert_eq!(r.pid, i64::from(std::process::id()));
        let queues: serde_json::Value = serde_json::from_str(&r.queues).unwrap();
        assert_eq!(
            queues,
            serde_json::json!([{"queue": "emails", "concurrency": 10},
                               {"queue": "reports", "concurrency": 2}])
        );
        assert_eq!((r.started_at, r.running), (7, 0));
        let other = registration("box-1:4242", &[], 7);
        assert_ne!(r.id, other.id, "two runs in one process are two workers");
    }
}
