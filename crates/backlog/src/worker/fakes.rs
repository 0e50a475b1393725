//! What the runtime's unit tests share: claimed jobs made up on the spot, errors of each kind,
//! and slots to hold. The fakes of each part's interface live with that part's tests.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::{ClaimedJob, DbErrorKind, Error};

/// When the made-up jobs were enqueued and became due (2024-01-01T00:00:00Z).
pub const T0: i64 = 1_704_067_200_000_000;

/// A job of queue `q` claimed with lease token `token`, on its first attempt.
pub fn job(id: i64, token: i64) -> ClaimedJob {
    ClaimedJob {
        id,
        queue: "q".into(),
        kind: Some("k".into()),
        payload: "{}".into(),
        priority: 0,
        attempt: 1,
        max_attempts: None,
        lease_token: token,
        lease_expires_at: T0 + 30_000_000,
        run_at: T0,
        created_at: T0,
        trace_context: None,
        group: None,
    }
}

/// An error a retry may get past (a lost connection).
pub fn transient() -> Error {
    Error::Database {
        kind: DbErrorKind::ConnectionLost,
        source: "connection reset".into(),
    }
}

/// An error no retry gets past.
pub fn fatal() -> Error {
    Error::Database {
        kind: DbErrorKind::Other,
        source: "no such table".into(),
    }
}

/// `n` slots of a semaphore of `n` permits, and the semaphore.
pub fn slots(n: usize) -> (Arc<Semaphore>, Vec<OwnedSemaphorePermit>) {
    let sem = Arc::new(Semaphore::new(n));
    let held = (0..n)
        .map(|_| sem.clone().try_acquire_owned().expect("a free permit"))
        .collect();
    (sem, held)
}
