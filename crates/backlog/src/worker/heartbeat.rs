//! The heartbeater: one task per run keeps alive the leases of the jobs that run past their
//! handler's first poll (those registered in the [`InFlightMap`]), renewing each every third of
//! its lease, and stops a job whose lease was lost or whose cancellation was requested. It
//! renews through [`LeaseKeeper`], which the [`Client`] implements and tests replace.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::context::{JobStop, StopReason};
use crate::{Client, Error, Heartbeat, JobRef, Result};

/// How often the heartbeater looks for leases due for renewal.
const TICK: Duration = Duration::from_millis(200);

/// How many renewals are in flight at once (each holds a connection while it runs).
const RENEWING_AT_ONCE: usize = 4;

/// A lease as a claim wrote it: how long it runs, and when the claim was sent (the lease runs
/// from no earlier, so renewals timed from then are never late).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lease {
    pub span: Duration,
    pub from: Instant,
}

/// A job in flight past its handler's first poll: its lease and how to stop it.
pub(crate) struct InFlight {
    pub job: JobRef,
    pub lease: Lease,
    pub stop: Arc<JobStop>,
}

/// The jobs in flight past their handler's first poll, by id.
pub(crate) type InFlightMap = Arc<Mutex<HashMap<i64, InFlight>>>;

/// Renewing a lease ([`Client::heartbeat`]).
pub(crate) trait LeaseKeeper: Send + Sync + 'static {
    /// Extends the job's lease to now + `lease`; `LeaseLost` if it is gone.
    fn heartbeat(
        &self,
        job: JobRef,
        lease: Duration,
    ) -> impl Future<Output = Result<Heartbeat>> + Send;
}

impl LeaseKeeper for Client {
    fn heartbeat(
        &self,
        job: JobRef,
        lease: Duration,
    ) -> impl Future<Output = Result<Heartbeat>> + Send {
        Client::heartbeat(self, job, lease)
    }
}

/// Keeps the leases of in-flight jobs alive and stops jobs whose lease is lost or whose
/// cancellation was requested.
pub(crate) struct Heartbeater<K> {
    keeper: Arc<K>,
    inflight: InFlightMap,
    /// When each job's lease was last renewed (or the job first seen).
    last: HashMap<i64, Instant>,
}

impl<K: LeaseKeeper> Heartbeater<K> {
    pub fn new(keeper: Arc<K>, inflight: InFlightMap) -> Self {
        Heartbeater {
            keeper,
            inflight,
            last: HashMap::new(),
        }
    }

    /// Renews leases every [`TICK`] until `stop`.
    pub async fn run(mut self, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = stop.cancelled() => return,
            }
            self.run_once().await;
        }
    }

    /// Renews the leases due (a third of the lease since the last renewal was sent, or since
    /// the claim that wrote it was), a few at a time so that one slow renewal holds up no
    /// other, and stops the jobs whose lease was lost or whose cancellation was requested.
    pub async fn run_once(&mut self) {
        let due: Vec<(JobRef, Duration)> = {
            let map = self.inflight.lock().expect("lock");
            self.last.retain(|id, _| map.contains_key(id));
            map.values()
                .filter(|f| !f.stop.is_stopped())
                .filter(|f| {
                    let at = self.last.entry(f.job.id).or_insert(f.lease.from);
                    at.elapsed() >= f.lease.span / 3
                })
                .map(|f| (f.job, f.lease.span))
                .collect()
        };
        let keeper = &self.keeper;
        let mut renewals = futures::stream::iter(due)
            .map(|(job, span)| async move {
                // The renewed lease runs from no earlier than now.
                let sent = Instant::now();
                (job, sent, keeper.heartbeat(job, span).await)
            })
            .buffer_unordered(RENEWING_AT_ONCE);
        while let Some((job, sent, result)) = renewals.next().await {
            let verdict = match result {
                Ok(h) if h.cancel_requested => Some(StopReason::CancelRequested),
                Ok(_) => None,
                Err(Error::LeaseLost { .. }) => Some(StopReason::LeaseLost),
                // Not renewed: tried again at the next tick, not a third of the lease later
                // (two failures in a row would otherwise let a short lease run out).
                Err(e) => {
                    tracing::warn!("heartbeat of job {} failed: {e}", job.id);
                    continue;
                }
            };
            self.last.insert(job.id, sent);
            if let Some(reason) = verdict
                && let Some(f) = self.inflight.lock().expect("lock").get(&job.id)
            {
                f.stop.stop(reason);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::fakes;

    /// Answers each job's heartbeats as scripted by its id (1: lease lost, 2: cancel requested,
    /// 3: a database error, 5: renewed after half a second, others: renewed); records them.
    #[derive(Default)]
    struct ScriptedKeeper {
        beats: Mutex<Vec<(i64, Duration)>>,
    }

    impl ScriptedKeeper {
        fn beats(&self) -> Vec<i64> {
            self.beats.lock().unwrap().drain(..).map(|b| b.0).collect()
        }
    }

    impl LeaseKeeper for ScriptedKeeper {
        async fn heartbeat(&self, job: JobRef, lease: Duration) -> Result<Heartbeat> {
            self.beats.lock().unwrap().push((job.id, lease));
            let ok = |cancel_requested| Heartbeat {
                lease_expires_at: 0,
                cancel_requested,
            };
            if job.id == 5 {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            match job.id {
                1 => Err(Error::LeaseLost { job_id: 1 }),
                2 => Ok(ok(true)),
                3 => Err(fakes::transient()),
                _ => Ok(ok(false)),
            }
        }
    }

    /// A heartbeater over jobs `ids`, each with `lease`; their stop signals by id.
    fn heartbeater(
        ids: &[i64],
        lease: Duration,
    ) -> (Heartbeater<ScriptedKeeper>, HashMap<i64, Arc<JobStop>>) {
        let inflight = InFlightMap::default();
        let mut stops = HashMap::new();
        for &id in ids {
            let stop = Arc::new(JobStop::default());
            stops.insert(id, stop.clone());
            let job = fakes::job(id, 10 + id).job_ref();
            let lease = Lease {
                span: lease,
                from: Instant::now(),
            };
            let f = InFlight { job, lease, stop };
            inflight.lock().unwrap().insert(id, f);
        }
        let keeper = Arc::new(ScriptedKeeper::default());
        (Heartbeater::new(keeper, inflight), stops)
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_renewed_every_third_of_it() {
        let (mut hb, _stops) = heartbeater(&[7], Duration::from_secs(3));
        hb.run_once().await;
        assert!(
            hb.keeper.beats().is_empty(),
            "a job just claimed has a fresh lease"
        );
        tokio::time::advance(Duration::from_millis(999)).await;
        hb.run_once().await;
        assert!(hb.keeper.beats().is_empty());
        tokio::time::advance(Duration::from_millis(1)).await;
        hb.run_once().await;
        assert_eq!(
            *hb.keeper.beats.lock().unwrap(),
            [(7, Duration::from_secs(3))]
        );
        hb.keeper.beats();
        hb.run_once().await;
        assert!(hb.keeper.beats().is_empty(), "renewed a moment ago");
        hb.inflight.lock().unwrap().remove(&7);
        tokio::time::advance(Duration::from_secs(1)).await;
        hb.run_once().await;
        assert!(hb.keeper.beats().is_empty(), "a job that ended is let go");
        assert!(hb.last.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_lease_or_a_cancel_request_stops_the_job() {
        let (mut hb, stops) = heartbeater(&[1, 2, 3, 4], Duration::from_secs(3));
        hb.run_once().await;
        tokio::time::advance(Duration::from_secs(1)).await;
        hb.run_once().await;
        let mut beats = hb.keeper.beats();
        beats.sort();
        assert_eq!(beats, [1, 2, 3, 4]);
        let reason = |id| stops[&id].reason();
        assert_eq!(reason(1), Some(StopReason::LeaseLost));
        assert_eq!(reason(2), Some(StopReason::CancelRequested));
        assert_eq!(reason(3), None, "a failed heartbeat is tried again");
        assert_eq!(reason(4), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        hb.run_once().await;
        let mut beats = hb.keeper.beats();
        beats.sort();
        assert_eq!(beats, [3, 4], "stopped jobs are not renewed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_renewal_is_tried_again_at_the_next_tick() {
        let (mut hb, stops) = heartbeater(&[3, 4], Duration::from_secs(3));
        tokio::time::advance(Duration::from_secs(1)).await;
        hb.run_once().await;
        let mut beats = hb.keeper.beats();
        beats.sort();
        assert_eq!(beats, [3, 4]);
        tokio::time::advance(TICK).await;
        hb.run_once().await;
        assert_eq!(hb.keeper.beats(), [3], "the renewed lease waits its third");
        assert_eq!(stops[&3].reason(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_heartbeater_looks_every_tick_until_stopped() {
        let (hb, _stops) = heartbeater(&[7], Duration::from_millis(600));
        let keeper = hb.keeper.clone();
        let stop = CancellationToken::new();
        let task = tokio::spawn(hb.run(stop.clone()));
        // Claimed at 0, renewed at 200, 400, 600, 800 and 1,000 ms.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        stop.cancel();
        task.await.unwrap();
        assert_eq!(keeper.beats(), [7, 7, 7, 7, 7]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_renewal_holds_up_no_other_and_counts_from_when_it_was_sent() {
        let (mut hb, _stops) = heartbeater(&[5, 6], Duration::from_secs(3));
        let start = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        hb.run_once().await;
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(1500),
            "renewed side by side"
        );
        let mut beats = hb.keeper.beats();
        beats.sort();
        assert_eq!(beats, [5, 6]);
        // Both were sent at 1 s, so both are due again at 2 s, however long the first took.
        tokio::time::advance(Duration::from_millis(499)).await;
        hb.run_once().await;
        assert!(hb.keeper.beats().is_empty());
        tokio::time::advance(Duration::from_millis(1)).await;
        hb.run_once().await;
        let mut beats = hb.keeper.beats();
        beats.sort();
        assert_eq!(beats, [5, 6]);
    }
}
