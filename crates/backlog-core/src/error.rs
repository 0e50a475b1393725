//! The one error type of backlog's library crates.

use crate::JobState;

/// Result with backlog's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, named by cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A queue name is empty, too long, or has characters outside `[A-Za-z0-9_.:-]`.
    #[error("invalid queue name {name:?}: {reason}")]
    QueueNameInvalid {
        /// The name as given.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A job kind is empty, too long, or has characters outside `[A-Za-z0-9_.:-]`.
    #[error("invalid job kind {kind:?}: {reason}")]
    KindInvalid {
        /// The kind as given.
        kind: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A unique key is empty or too long.
    #[error("invalid unique key: {reason}")]
    UniqueKeyInvalid {
        /// Why it was refused.
        reason: &'static str,
    },
    /// A group key is empty, too long, or holds a NUL.
    #[error("invalid group key: {reason}")]
    GroupKeyInvalid {
        /// Why it was refused.
        reason: &'static str,
    },
    /// A W3C trace context (`traceparent`, `tracestate`) is malformed.
    #[error("invalid trace context: {reason}")]
    TraceContextInvalid {
        /// Why it was refused.
        reason: &'static str,
    },
    /// A payload is not valid JSON.
    #[error("invalid JSON payload: {reason}")]
    PayloadInvalid {
        /// The parser's message.
        reason: String,
    },
    /// A payload is larger than the configured limit.
    #[error("payload of {size} bytes is over the limit of {limit} bytes")]
    PayloadTooLarge {
        /// Size of the payload in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A number is outside the range an option accepts.
    #[error("{what} must be between {min} and {max}, got {value}")]
    ValueOutOfRange {
        /// The option.
        what: &'static str,
        /// The value given.
        value: i64,
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A duration could not be read.
    #[error("invalid duration {input:?}: {reason} (use e.g. 500ms, 30s, 5m, 2h)")]
    DurationInvalid {
        /// The text given.
        input: String,
        /// Why it was refused.
        reason: String,
    },
    /// A state name is not one of the known states.
    #[error(
        "unknown state {value:?} (expected one of: {})",
        crate::StateFilter::NAMES
    )]
    StateInvalid {
        /// The name given.
        value: String,
    },
    /// An option value is not one of the accepted words.
    #[error("invalid {what} {value:?} (expected one of: {expected})")]
    OptionInvalid {
        /// The option.
        what: &'static str,
        /// The value given.
        value: String,
        /// The accepted values.
        expected: &'static str,
    },
    /// A job's dependencies cannot be taken as given (a parent named twice, a bad id, a job of
    /// an ordered group).
    #[error("invalid dependencies: {reason}")]
    DependencyInvalid {
        /// Why they were refused.
        reason: String,
    },
    /// A parent named by a new job is not a job: it never was, or it ended and was pruned
    /// (under retention `delete`, at once).
    #[error(
        "job {parent} cannot be waited for: no such job (it never was, or it ended and was pruned)"
    )]
    ParentNotFound {
        /// The parent's id.
        parent: i64,
    },
    /// A job was handed to an operation on another queue.
    #[error("job {job_id} belongs to queue {queue:?}, not {expected:?}")]
    JobQueueMismatch {
        /// The job.
        job_id: i64,
        /// Its queue.
        queue: String,
        /// The queue the operation was for.
        expected: String,
    },
    /// A database URL could not be used.
    #[error("invalid database URL {url:?}: {reason}")]
    DatabaseUrlInvalid {
        /// The URL with any password removed.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The caller's lease on the job is gone: the token is stale (the job was rescued and claimed
    /// again, or finished) so nothing was changed.
    #[error("lease lost on job {job_id}: the job is no longer held with this lease token")]
    LeaseLost {
        /// The job.
        job_id: i64,
    },
    /// No job has this id.
    #[error("no job with id {job_id}")]
    JobNotFound {
        /// The id asked for.
        job_id: i64,
    },
    /// The job exists but its state does not allow the operation.
    #[error(
        "cannot {action} job {job_id}: it is {reported}{}",
        state_hint(action, reported)
    )]
    JobStateConflict {
        /// The job.
        job_id: i64,
        /// Its current state.
        state: JobState,
        /// That state as users see it (`scheduled` or `retrying` for an available job not yet
        /// due; see [`crate::Job::reported_state`]).
        reported: &'static str,
        /// What was asked.
        action: &'static str,
    },
    /// A job did not finish within the time a producer waited for it.
    #[error("job {job_id} did not finish within {waited_ms} ms")]
    WaitTimeout {
        /// The job.
        job_id: i64,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// The backend cannot do this (see [`crate::Capabilities`]).
    #[error("not supported by this database: {0}")]
    Unsupported(&'static str),
    /// The schema is older than this build expects; run `backlog migrate`.
    #[error(
        "the database schema is at version {found}, this build needs {expected}: run `backlog migrate`"
    )]
    SchemaOutdated {
        /// Version found.
        found: i64,
        /// Version needed.
        expected: i64,
    },
    /// The database reported an error.
    #[error("database error ({kind}): {source}")]
    Database {
        /// What kind of failure, for retry decisions.
        kind: DbErrorKind,
        /// The driver's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// True when retrying the same operation may succeed (deadlock, serialization failure,
    /// lock timeout, lost connection).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Database { kind, .. } => kind.is_transient(),
            _ => false,
        }
    }
}

/// The small set of database failures that code acts on differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DbErrorKind {
    /// A unique constraint was violated.
    UniqueViolation,
    /// A CHECK or other integrity constraint was violated.
    ConstraintViolation,
    /// The transaction was chosen as a deadlock victim.
    Deadlock,
    /// A serializable transaction could not be ordered.
    SerializationFailure,
    /// A lock wait or statement timed out (or SQLite was busy).
    LockTimeout,
    /// The connection was lost or could not be made.
    ConnectionLost,
    /// No answer within the statement timeout: the server or the network stalled, and whether
    /// the call took effect is unknown.
    NoAnswer,
    /// No connection of the pool came free within the acquire timeout: every one was busy (more
    /// callers at once than `max_connections`), or new ones could not be opened.
    PoolTimeout,
    /// The database cannot write, though it still reads: its disk is full, its file or file
    /// system is read-only, or a write failed (SQLite's `SQLITE_FULL`, `SQLITE_READONLY` and
    /// `SQLITE_IOERR`; PostgreSQL's `disk_full`). Writes succeed again once an operator frees
    /// space or makes the file writable, without restarting anything, so callers that can wait
    /// (workers) retry with a back-off; retrying at once does not help.
    StorageUnavailable,
    /// Anything else.
    Other,
}

impl DbErrorKind {
    /// See [`Error::is_transient`].
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            DbErrorKind::Deadlock
                | DbErrorKind::SerializationFailure
                | DbErrorKind::LockTimeout
                | DbErrorKind::ConnectionLost
                | DbErrorKind::NoAnswer
                | DbErrorKind::PoolTimeout
                | DbErrorKind::StorageUnavailable
        )
    }
}

impl std::fmt::Display for DbErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DbErrorKind::UniqueViolation => "unique violation",
            DbErrorKind::ConstraintViolation => "constraint violation",
            DbErrorKind::Deadlock => "deadlock",
            DbErrorKind::SerializationFailure => "serialization failure",
            DbErrorKind::LockTimeout => "lock timeout",
            DbErrorKind::ConnectionLost => "connection lost",
            DbErrorKind::NoAnswer => "no answer",
            DbErrorKind::PoolTimeout => "no pool connection within the acquire timeout",
            DbErrorKind::StorageUnavailable => "storage unavailable",
            DbErrorKind::Other => "other",
        })
    }
}

/// What to do instead, for a refusal with an obvious other way.
fn state_hint(action: &str, reported: &str) -> &'static str {
    match (action, reported) {
        ("retry", "scheduled" | "retrying") => " (run-now makes it due at once)",
        _ => "",
    }
}
