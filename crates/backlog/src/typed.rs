//! Typed jobs: a serde type names its kind (and default queue) once.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Client, Kind, NewJob, Result};

/// A job's arguments as a Rust type. Handlers registered with
/// [`WorkerBuilder::handler`](crate::WorkerBuilder::handler) receive it deserialized.
///
/// # Example
/// ```
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct SendEmail { to: String }
///
/// impl backlog::JobArgs for SendEmail {
///     const KIND: &'static str = "send_email";
///     const QUEUE: &'static str = "emails";
/// }
/// ```
pub trait JobArgs: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The kind stored with the job and used to find its handler.
    const KIND: &'static str;
    /// The queue jobs of this type go to unless told otherwise.
    const QUEUE: &'static str = "default";
}

impl Client {
    /// A job of a typed kind, to its default queue (change `queue` or any option before
    /// enqueueing).
    pub fn job_for<A: JobArgs>(&self, args: &A) -> Result<NewJob> {
        let mut job = self.new_job(A::QUEUE, args)?;
        job.kind = Some(Kind::new(A::KIND)?);
        Ok(job)
    }
}
