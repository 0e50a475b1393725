//! Helpers for testing code that uses backlog: run a job's handler inline, drain queues
//! ([`Worker::drain`](crate::Worker::drain)), and assert that a job was enqueued.

use std::fmt::Debug;
use std::sync::Arc;

use crate::{
    ClaimedJob, Client, HandlerResult, JobArgs, JobContext, QueueName, Result, StateFilter, Worker,
};

/// Runs the worker's handler for `args` right here, without the database: no claim, no lease,
/// progress reports are dropped. For unit tests of handlers.
pub async fn run_inline<A: JobArgs>(worker: &Worker, args: &A) -> HandlerResult {
    let inner = &worker.inner;
    let handler = inner
        .handlers
        .get(A::KIND)
        .or(inner.fallback.as_ref())
        .ok_or_else(|| format!("no handler for kind {:?}", A::KIND))?
        .clone();
    let now = inner.client.now();
    let job = ClaimedJob {
        id: 0,
        queue: A::QUEUE.into(),
        kind: Some(A::KIND.into()),
        payload: serde_json::to_string(args)?,
        priority: 0,
        attempt: 1,
        max_attempts: None,
        lease_token: 0,
        lease_expires_at: now,
        run_at: now,
        created_at: now,
        trace_context: None,
        group: None,
    };
    handler(JobContext {
        job: Arc::new(job),
        client: inner.client.clone(),
        stop: Default::default(),
        inline: true,
    })
    .await
}

/// The arguments of every unfinished job of kind `A` in its default queue, oldest first.
pub async fn enqueued<A: JobArgs>(client: &Client) -> Result<Vec<A>> {
    let queue = QueueName::new(A::QUEUE)?;
    let mut out = vec![];
    let mut after = 0;
    loop {
        let page = client.jobs(Some(&queue), None, after, 1000).await?;
        let Some(last) = page.last() else { break };
        after = last.id;
        for job in &page {
            if job.kind.as_deref() == Some(A::KIND)
                && !job.state.is_finished()
                && let Ok(a) = serde_json::from_str::<A>(&job.payload)
            {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// Panics unless an unfinished job of kind `A` with exactly these arguments is in its queue.
///
/// # Example
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> backlog::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let client = backlog::Client::connect(&format!("sqlite://{}", dir.path().join("t.db").display())).await?;
/// # client.migrate().await?;
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Welcome { user: u64 }
/// impl backlog::JobArgs for Welcome { const KIND: &'static str = "welcome"; }
///
/// client.enqueue(client.job_for(&Welcome { user: 7 })?).await?;
/// backlog::testing::assert_enqueued(&client, &Welcome { user: 7 }).await;
/// # Ok(()) }
/// ```
pub async fn assert_enqueued<A: JobArgs + PartialEq + Debug>(client: &Client, args: &A) {
    let found = enqueued::<A>(client).await.expect("listing jobs");
    assert!(
        found.iter().any(|a| a == args),
        "no {} job with {args:?} in queue {:?}; enqueued: {found:?}",
        A::KIND,
        A::QUEUE
    );
}

/// The jobs of a queue in a state (for assertions).
pub async fn jobs_in(
    client: &Client,
    queue: &str,
    state: Option<StateFilter>,
) -> Result<Vec<crate::Job>> {
    client
        .jobs(Some(&QueueName::new(queue)?), state, 0, 100_000)
        .await
}
