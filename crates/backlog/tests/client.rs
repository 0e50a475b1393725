//! The client's own logic (rescue on claim, backoff, snooze, validation), with an injected clock
//! instead of sleeps. Backend behaviour is pinned by backlog-sql's conformance suite.

use std::sync::Arc;
use std::time::Duration;

use backlog::{
    ClaimOpts, Client, Error, FailOutcome, JobState, ManualClock, QueueName, QueueSettings,
};

const SEC: i64 = 1_000_000;

async fn client(dir: &tempfile::TempDir, clock: &ManualClock) -> Client {
    let url = format!("sqlite://{}", dir.path().join("c.db").display());
    let c = Client::connect(&url)
        .await
        .unwrap()
        .with_clock(Arc::new(clock.clone()));
    c.migrate().await.unwrap();
    c
}

#[tokio::test]
async fn the_next_claimer_rescues_an_expired_lease() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000 * SEC);
    let a = client(&dir, &clock).await;
    let id = a.enqueue(a.new_job("s4", &1).unwrap()).await.unwrap().id;
    let opts = ClaimOpts::new("s4").unwrap().lease(Duration::from_secs(5));
    let first = a.claim(&opts.clone().owner("a")).await.unwrap().remove(0);
    // Another process (another client) claims after the lease ran out: nothing else runs.
    let b = client(&dir, &clock).await;
    assert!(b.claim(&opts.clone().owner("b")).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(6));
    let second = b.claim(&opts.clone().owner("b")).await.unwrap().remove(0);
    assert_eq!((second.id, second.attempt), (id, 2));
    assert!(matches!(a.complete(&first).await, Err(Error::LeaseLost { job_id }) if job_id == id));
    assert!(matches!(
        a.heartbeat(first.job_ref(), Duration::from_secs(5)).await,
        Err(Error::LeaseLost { .. })
    ));
    b.complete(&second).await.unwrap();
    let job = b.job(id).await.unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert!(
        job.errors[0].error.contains("lease expired (worker a"),
        "{:?}",
        job.errors
    );
}

#[tokio::test]
async fn failures_back_off_then_die() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000 * SEC);
    let c = client(&dir, &clock).await;
    let mut s = QueueSettings::defaults(QueueName::new("bo").unwrap());
    s.max_attempts = 3;
    s.backoff_base = Duration::from_secs(2);
    s.backoff_max = Duration::from_secs(3);
    c.queue_configure(&s).await.unwrap();
    let id = c.enqueue(c.new_job("bo", &"x").unwrap()).await.unwrap().id;
    let opts = ClaimOpts::new("bo").unwrap();
    let mut bounds = vec![];
    for attempt in 1..=3 {
        let j = c.claim(&opts).await.unwrap().remove(0);
        assert_eq!(j.attempt, attempt);
        let now = c.now();
        match c.fail(&j, "nope").await.unwrap() {
            FailOutcome::Retry { at } => {
                bounds.push(at - now);
                clock.set(at);
            }
            FailOutcome::Dead => assert_eq!(attempt, 3),
            FailOutcome::Cancelled => panic!("a plain failure must not cancel the job"),
        }
    }
    // base 2s: first retry in [1s, 2s]; second capped at 3s: in [1.5s, 3s].
    assert!((SEC..=2 * SEC).contains(&bounds[0]), "{bounds:?}");
    assert!((3 * SEC / 2..=3 * SEC).contains(&bounds[1]), "{bounds:?}");
    let job = c.job(id).await.unwrap();
    assert_eq!((job.state, job.errors.len()), (JobState::Dead, 3));
    assert_eq!(
        c.redrive(&QueueName::new("bo").unwrap(), 10).await.unwrap(),
        1
    );
    assert_eq!(c.job(id).await.unwrap().attempt, 0);
}

#[tokio::test]
async fn snooze_and_release_do_not_count_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000 * SEC);
    let c = client(&dir, &clock).await;
    let id = c.enqueue(c.new_job("sn", &{}).unwrap()).await.unwrap().id;
    let opts = ClaimOpts::new("sn").unwrap();
    let j = c.claim(&opts).await.unwrap().remove(0);
    c.snooze(&j, Duration::from_secs(60)).await.unwrap();
    let job = c.job(id).await.unwrap();
    assert_eq!(
        (job.attempt, job.run_at, job.reported_state(c.now())),
        (0, c.now() + 60 * SEC, "scheduled")
    );
    assert!(c.claim(&opts).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(60));
    let j = c.claim(&opts).await.unwrap().remove(0);
    assert_eq!(j.attempt, 1);
    c.release(&j, Duration::ZERO).await.unwrap();
    assert!(matches!(
        c.release(&j, Duration::ZERO).await,
        Err(Error::LeaseLost { .. })
    ));
}

#[tokio::test]
async fn bad_input_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000 * SEC);
    let c = client(&dir, &clock).await.with_payload_limit(16);
    assert!(matches!(
        c.new_job("q", &"x".repeat(20)),
        Err(Error::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        c.new_job("no spaces", &1),
        Err(Error::QueueNameInvalid { .. })
    ));
    // new_job keeps the last queue name it checked: a bad name after a good one is still refused,
    // and the names after it are each their own.
    for (queue, ok) in [
        ("q", true),
        ("q x", false),
        ("q", true),
        ("r", true),
        ("q;", false),
    ] {
        match c.new_job(queue, &1) {
            Ok(j) => assert!(ok && j.queue.as_str() == queue, "{queue:?}"),
            Err(e) => assert!(
                !ok && matches!(e, Error::QueueNameInvalid { .. }),
                "{queue:?}"
            ),
        }
    }
    let mut j = c.new_job("q", &1).unwrap();
    j.max_attempts = Some(0);
    let ok = c.new_job("q", &2).unwrap();
    assert!(matches!(
        c.enqueue_many(vec![ok, j]).await,
        Err(Error::ValueOutOfRange { .. })
    ));
    let mut s = QueueSettings::defaults(QueueName::new("q").unwrap());
    s.backoff_base = Duration::from_secs(10);
    s.backoff_max = Duration::from_secs(1);
    assert!(matches!(
        c.queue_configure(&s).await,
        Err(Error::OptionInvalid { .. })
    ));
    assert!(
        c.stats(None).await.unwrap().is_empty(),
        "a refused call created something"
    );
    assert!(matches!(
        c.job(12345).await,
        Err(Error::JobNotFound { job_id: 12345 })
    ));
    assert!(ClaimOpts::new("").is_err());
}

#[tokio::test]
async fn complete_claim_refuses_jobs_of_another_queue() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000 * SEC);
    let c = client(&dir, &clock).await;
    for q in ["cc-a", "cc-b"] {
        c.enqueue_many(vec![c.new_job(q, &1).unwrap(), c.new_job(q, &2).unwrap()])
            .await
            .unwrap();
    }
    let a = c
        .claim(&ClaimOpts::new("cc-a").unwrap().limit(1))
        .await
        .unwrap();
    let b_opts = ClaimOpts::new("cc-b").unwrap().limit(2);
    let err = c.complete_claim(&a, &b_opts).await.unwrap_err();
    assert!(matches!(err, Error::JobQueueMismatch { job_id, .. } if job_id == a[0].id));
    assert!(
        err.to_string().contains("belongs to queue \"cc-a\""),
        "{err}"
    );
    // Nothing changed: a's job still runs, b's jobs are still waiting.
    assert_eq!(c.job(a[0].id).await.unwrap().state, JobState::Running);
    let b = c.claim(&b_opts).await.unwrap();
    assert_eq!(b.len(), 2);
    // The right queue: a's job completes and the next one is claimed, in one call.
    let r = c
        .complete_claim(&a, &ClaimOpts::new("cc-a").unwrap().limit(5))
        .await
        .unwrap();
    assert_eq!(r.completed, vec![a[0].job_ref()]);
    assert_eq!(r.claimed.unwrap().len(), 1);
    assert_eq!(c.job(a[0].id).await.unwrap().state, JobState::Completed);
}

/// A queue exists through its settings (every queue backlog enqueued to, or configured, has
/// them) or its jobs alone (a plain-SQL producer's); an operator's action on any other name
/// is refused by the CLI and the API (`queue_known`).
#[tokio::test]
async fn a_queue_is_known_by_its_settings_or_its_jobs() {
    use backlog_testdb::{Engine, TestDb};
    let db = TestDb::new(Engine::Sqlite).await;
    let c = &db.client;
    let name = |n: &str| QueueName::new(n).unwrap();
    assert!(!c.queue_known(&name("mail")).await.unwrap());
    c.enqueue(c.new_job("mail", &1).unwrap()).await.unwrap();
    assert!(c.queue_known(&name("mail")).await.unwrap());
    // Settings alone, no job yet.
    c.queue_configure(&QueueSettings::defaults(name("later")))
        .await
        .unwrap();
    assert!(c.queue_known(&name("later")).await.unwrap());
    // Jobs alone: written in plain SQL, no settings row.
    db.exec("INSERT INTO backlog_job (queue, payload) VALUES ('plain', '{}')")
        .await;
    assert!(c.queue_known(&name("plain")).await.unwrap());
    assert!(!c.queue_known(&name("nope")).await.unwrap());
    db.drop_db().await;
}
