//! What a worker's parts share: its setup ([`Inner`], one per [`Worker`](super::Worker)), whose
//! counts live in `metrics`. It imports no other part but `metrics` (itself a leaf), so the parts
//! (claim loops, executors, completer, run) depend on it and not on one another.

use std::collections::HashMap;
use std::sync::Arc;

use super::{ErasedHandler, PeriodicJob, WorkerConfig};
use crate::{Client, Kind, QueueName};

#[derive(Clone)]
pub(crate) struct Inner {
    pub client: Arc<Client>,
    pub queues: Vec<(QueueName, usize)>,
    pub handlers: HashMap<String, ErasedHandler>,
    pub fallback: Option<ErasedHandler>,
    pub kinds: Vec<Kind>,
    pub periodic: Vec<PeriodicJob>,
    pub config: WorkerConfig,
    /// Outcomes recorded, over every run of this worker.
    pub counters: Arc<super::metrics::Counters>,
    /// Claim round trips and their durations.
    pub claim_times: Arc<super::metrics::ClaimTimes>,
    /// The queues' slots of the current run.
    pub loads: Arc<super::metrics::Loads>,
}
