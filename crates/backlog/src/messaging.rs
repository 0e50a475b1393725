//! Messaging on top of queues (seed S3): fan-out through topics, and producers waiting for a
//! job's outcome. Competing consumers are simply several workers of one queue.

use std::time::Duration;

use crate::{Client, EnqueueOutcome, Error, Job, NewJob, QueueName, Result};

impl Client {
    /// Subscribes a queue to a topic: from now on it gets its own copy of every job published to
    /// the topic (copy mode). Topic names follow the rules of queue names.
    pub async fn subscribe(&self, topic: &str, queue: &str) -> Result<()> {
        let (t, q) = (QueueName::new(topic)?, QueueName::new(queue)?);
        self.backend()
            .topic_subscribe(&t, &q, true, self.now())
            .await
    }

    /// Ends a subscription.
    pub async fn unsubscribe(&self, topic: &str, queue: &str) -> Result<()> {
        let (t, q) = (QueueName::new(topic)?, QueueName::new(queue)?);
        self.backend()
            .topic_subscribe(&t, &q, false, self.now())
            .await
    }

    /// The queues subscribed to a topic.
    pub async fn subscribers(&self, topic: &str) -> Result<Vec<QueueName>> {
        self.backend()
            .topic_subscribers(&QueueName::new(topic)?)
            .await
    }

    /// Publishes a job to a topic: every subscribed queue gets a copy (its `queue` is replaced),
    /// all in one transaction. Returns one outcome per subscriber, in the order of
    /// [`Client::subscribers`]; none when nobody subscribes.
    ///
    /// # Example
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> backlog::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let client = backlog::Client::connect(&format!("sqlite://{}", dir.path().join("t.db").display())).await?;
    /// # client.migrate().await?;
    /// client.subscribe("orders", "billing").await?;
    /// client.subscribe("orders", "shipping").await?;
    /// let copies = client.publish("orders", client.new_job("orders", &serde_json::json!({"id": 7}))?).await?;
    /// assert_eq!(copies.len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn publish(&self, topic: &str, job: NewJob) -> Result<Vec<EnqueueOutcome>> {
        let queues = self.subscribers(topic).await?;
        let copies = queues
            .into_iter()
            .map(|q| {
                let mut j = job.clone();
                j.queue = q;
                j
            })
            .collect();
        self.enqueue_many(copies).await
    }

    /// Waits until a job is finished (completed, dead or cancelled) and returns it, as any
    /// process can: it asks the database. Returns `None` when the job is gone (completed in a
    /// queue whose retention deletes jobs). `WaitTimeout` after `timeout`.
    pub async fn wait_for(&self, id: i64, timeout: Duration) -> Result<Option<Job>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut pause = Duration::from_millis(5);
        let mut seen = false;
        loop {
            match self.backend().job_get(id).await? {
                Some(job) if job.state.is_finished() => return Ok(Some(job)),
                Some(_) => seen = true,
                None if seen => return Ok(None),
                None => return Err(Error::JobNotFound { job_id: id }),
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(Error::WaitTimeout {
                    job_id: id,
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }
}
