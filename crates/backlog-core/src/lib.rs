//! The core of backlog: the job model, its states, validation of everything a user can type,
//! errors, and the backend seam that every database implements.
//!
//! Map of the main types:
//! - [`JobState`]: the closed set of states a job can be in (one CHECK constraint per dialect).
//! - [`Job`], [`NewJob`], [`ClaimedJob`], [`JobRef`]: a job as stored, as enqueued, as claimed.
//! - [`QueueSettings`], [`Ordering`], [`Retention`]: per-queue configuration.
//! - [`TraceContext`]: the W3C trace context a job carries from its enqueuer to its handler.
//! - [`QueueName`], [`Kind`], [`UniqueKey`], [`Payload`]: validated inputs (nothing a user types
//!   reaches SQL as text).
//! - [`Backend`] with its `…Params` structs and [`Capabilities`]: the one trait a database implements.
//! - [`Clock`]: the injectable clock (all times are microseconds since the Unix epoch, UTC).
//! - [`Error`]: one error enum, variants named by cause.

mod backend;
mod backoff;
mod clock;
mod duration;
mod error;
mod job;
mod queue;
mod stat;
mod state;
mod trace;
mod validate;

pub use backend::{
    AdminAction, AsAny, Backend, BackendTx, Capabilities, ClaimStrategy, CompleteClaimed,
    CronFireParams, GroupPromoteParams, JobClaimParams, JobCompleteClaimParams, JobCompleteParams,
    JobCountPendingParams, JobDoneTurnParams, JobFailParams, JobHeartbeatParams, JobInsertParams,
    JobListParams, JobProgressParams, JobPruneParams, JobReleaseParams, JobRescueParams,
    JobVacuumParams, JobVacuumed, LeaderParams, MigrateReport, OldestTransaction,
    QueueRedriveParams, Rescued, TxClaim, TxFailure, TxFinish, WakeFn, complete_then_claim,
    done_period,
};
pub use backoff::backoff_delay;
pub use clock::{Clock, ManualClock, SystemClock, now_micros};
pub use duration::{format_duration, parse_duration};
pub use error::{DbErrorKind, Error, Result};
pub use job::{
    ClaimedJob, Dependency, EnqueueOutcome, ErrorRecord, Job, JobRef, MAX_PARENTS, NewJob,
    OnParentFailure, check_dependencies,
};
pub use queue::{
    BlockReason, BlockedGroup, Due, GroupFailure, Ordering, QueueFlow, QueueInfo, QueueSettings,
    QueueStats, RateLimit, Retention,
};
pub use stat::{
    AUDIT_ACTIONS, AUDIT_ACTIONS_LIST, AuditEntry, AuditListParams, CronSchedule, StatCounts,
    StatDepth, StatRow, WAIT_BOUNDS_US, WorkerRegistration, minute_of,
};
pub use state::{JobState, StateFilter};
pub use trace::{MAX_TRACESTATE_LEN, TraceContext};
pub use validate::{
    DEFAULT_PAYLOAD_LIMIT, GroupKey, Kind, MAX_NAME_LEN, MAX_UNIQUE_KEY_LEN, Payload, QueueName,
    UniqueKey,
};
