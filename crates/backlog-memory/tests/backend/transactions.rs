//! Transactions the caller controls (`MemoryTx`): what the conformance suite's one test of them
//! does not pin, the edges of the optimistic isolation above all.

use backlog_memory::MemoryTx;

use super::*;

async fn begin(b: &MemoryBackend) -> Box<dyn BackendTx> {
    b.begin().await.unwrap()
}

async fn enqueue(tx: &mut dyn BackendTx, jobs: Vec<NewJob>) -> Vec<EnqueueOutcome> {
    tx.enqueue(jobs, NOW).await.unwrap()
}

fn done(jobs: Vec<JobRef>) -> JobCompleteParams {
    JobCompleteParams {
        jobs,
        now: NOW,
        retention: Retention::Keep,
    }
}

async fn state(b: &MemoryBackend, id: i64) -> Option<JobState> {
    b.job_get(id).await.unwrap().map(|j| j.state)
}

/// One claimed job of a fresh queue.
async fn running(b: &MemoryBackend, queue: &str) -> JobRef {
    insert(b, vec![job(queue)], NOW).await;
    b.job_claim(&claim(queue, 1, NOW)).await.unwrap()[0].job_ref()
}

#[tokio::test]
async fn rollback_and_drop_leave_nothing_behind() {
    let b = MemoryBackend::new();
    let (wake, heard) = recorder();
    b.listen(wake).await.unwrap();
    let r = running(&b, "w").await;
    take(&heard);

    let mut tx = begin(&b).await;
    let id = enqueue(&mut *tx, vec![job("t")]).await[0].id;
    assert_eq!(tx.complete(&done(vec![r])).await.unwrap(), [r]);
    tx.rollback().await.unwrap();

    let mut tx = begin(&b).await;
    let dropped = enqueue(&mut *tx, vec![keyed("t", "k")]).await[0].id;
    assert_eq!(tx.complete(&done(vec![r])).await.unwrap(), [r]);
    drop(tx);

    for id in [id, dropped] {
        assert_eq!(state(&b, id).await, None);
    }
    assert_eq!(state(&b, r.id).await, Some(JobState::Running));
    assert!(
        b.queue_get(&q("t")).await.unwrap().is_none(),
        "queue row kept"
    );
    assert!(
        take(&heard).is_empty(),
        "a wake-up for jobs that never were"
    );
    // The key is free, and a rolled-back id is spent, as a database sequence's is.
    let next = insert(&b, vec![keyed("t", "k")], NOW).await[0];
    assert!(next > dropped);
}

#[tokio::test]
async fn enqueued_jobs_appear_at_commit_with_the_ids_given() {
    let b = MemoryBackend::new();
    let (wake, heard) = recorder();
    b.listen(wake).await.unwrap();

    let mut tx = begin(&b).await;
    let mut later = job("t");
    later.run_at = Some(NOW + SEC);
    let ids: Vec<i64> = enqueue(&mut *tx, vec![job("t"), later])
        .await
        .iter()
        .map(|o| o.id)
        .collect();
    // Others see none of it, and go on without waiting for the transaction.
    assert!(all_jobs(&b).await.is_empty());
    assert!(b.job_claim(&claim("t", 10, NOW)).await.unwrap().is_empty());
    let outside = insert(&b, vec![job("u")], NOW).await[0];
    assert!(outside > ids[1]);
    assert_eq!(take(&heard), ["u"]);

    tx.commit().await.unwrap();
    assert_eq!(take(&heard), ["t"], "woken at commit, for the due job");
    let listed: Vec<i64> = all_jobs(&b).await.iter().map(|j| j.id).collect();
    assert_eq!(listed, [ids[0], ids[1], outside]);
    assert_eq!(b.job_get(ids[1]).await.unwrap().unwrap().run_at, NOW + SEC);
    assert!(b.queue_get(&q("t")).await.unwrap().is_some(), "queue row");
    let c = b.job_claim(&claim("t", 10, NOW)).await.unwrap();
    assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), [ids[0]]);
}

#[tokio::test]
async fn unique_keys_in_a_transaction_see_committed_and_own_jobs() {
    let b = MemoryBackend::new();
    let held = insert(&b, vec![keyed("t", "a")], NOW).await[0];
    let mut tx = begin(&b).await;
    let out = enqueue(&mut *tx, vec![keyed("t", "a"), keyed("t", "b")]).await;
    assert_eq!(
        out[0],
        EnqueueOutcome {
            id: held,
            created: false
        }
    );
    assert!(out[1].created);
    let again = enqueue(&mut *tx, vec![keyed("t", "b")]).await;
    assert_eq!(
        again[0],
        EnqueueOutcome {
            id: out[1].id,
            created: false
        }
    );
    tx.commit().await.unwrap();
    let jobs = all_jobs(&b).await;
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[1].unique_key.as_deref(), Some("b"));
}

#[tokio::test]
async fn a_key_the_transaction_frees_is_free_in_it() {
    let b = MemoryBackend::new();
    insert(&b, vec![keyed("t", "k")], NOW).await;
    let r = b.job_claim(&claim("t", 1, NOW)).await.unwrap()[0].job_ref();
    let mut tx = begin(&b).await;
    tx.complete(&done(vec![r])).await.unwrap();
    let next = enqueue(&mut *tx, vec![keyed("t", "k")]).await[0];
    assert!(next.created && next.id != r.id);
    // Outside, the key is still held by the running job until commit.
    let outside = insert(&b, vec![keyed("t", "k")], NOW).await[0];
    assert_eq!(outside, r.id);
    tx.commit().await.unwrap();
    assert_eq!(state(&b, r.id).await, Some(JobState::Completed));
    assert_eq!(state(&b, next.id).await, Some(JobState::Available));
}

#[tokio::test]
async fn completions_are_fenced_and_wait_for_commit() {
    let b = MemoryBackend::new();
    let r = running(&b, "t").await;
    let stale = JobRef {
        id: r.id,
        token: r.token.wrapping_add(1),
    };
    let mut tx = begin(&b).await;
    assert!(tx.complete(&done(vec![stale])).await.unwrap().is_empty());
    assert_eq!(tx.complete(&done(vec![r, r])).await.unwrap(), [r]);
    assert!(
        tx.complete(&done(vec![r])).await.unwrap().is_empty(),
        "twice"
    );
    assert_eq!(state(&b, r.id).await, Some(JobState::Running));
    tx.commit().await.unwrap();
    assert_eq!(state(&b, r.id).await, Some(JobState::Completed));
}

#[tokio::test]
async fn a_completion_by_someone_else_before_commit_fails_the_commit() {
    let b = MemoryBackend::new();
    let r = running(&b, "t").await;
    let mut tx = begin(&b).await;
    let follow = enqueue(&mut *tx, vec![job("out")]).await[0].id;
    assert_eq!(tx.complete(&done(vec![r])).await.unwrap(), [r]);
    // The lease ends outside (a rescue and a new claim would do the same).
    let mut archived = done(vec![r]);
    archived.retention = Retention::Archive;
    assert_eq!(b.job_complete(archived).await.unwrap(), [r]);

    let e = tx.commit().await.unwrap_err();
    assert!(
        matches!(e, Error::LeaseLost { job_id } if job_id == r.id),
        "{e}"
    );
    assert_eq!(
        state(&b, follow).await,
        None,
        "the handler's write survived"
    );
    assert!(b.archived(r.id).is_some(), "the other completion is kept");
}

#[tokio::test]
async fn a_rescue_and_new_claim_before_commit_fail_the_commit() {
    let b = MemoryBackend::new();
    insert(&b, vec![job("t")], NOW).await;
    let mut p = claim("t", 1, NOW);
    p.lease = Duration::from_secs(1);
    let r = b.job_claim(&p).await.unwrap()[0].job_ref();
    let mut tx = begin(&b).await;
    assert_eq!(tx.complete(&done(vec![r])).await.unwrap(), [r]);
    let later = NOW + 2 * SEC;
    let rescue = JobRescueParams {
        now: later,
        limit: 10,
    };
    assert_eq!(b.job_rescue(rescue).await.unwrap().len(), 1);
    let again = b.job_claim(&claim("t", 1, later)).await.unwrap()[0].job_ref();
    assert_eq!(again.id, r.id);

    assert!(matches!(tx.commit().await, Err(Error::LeaseLost { .. })));
    let j = b.job_get(r.id).await.unwrap().unwrap();
    assert_eq!(
        (j.state, j.lease_token),
        (JobState::Running, Some(again.token))
    );
}

#[tokio::test]
async fn a_key_taken_by_another_commit_fails_the_commit() {
    let b = MemoryBackend::new();
    let r = running(&b, "w").await;
    let mut tx = begin(&b).await;
    let mine = enqueue(&mut *tx, vec![job("t"), keyed("t", "k")]).await;
    assert!(mine[1].created);
    tx.complete(&done(vec![r])).await.unwrap();
    let theirs = insert(&b, vec![keyed("t", "k")], NOW).await[0];
    assert_ne!(theirs, mine[1].id);

    let e = tx.commit().await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Database {
                kind: DbErrorKind::SerializationFailure,
                ..
            }
        ) && e.is_transient(),
        "{e}"
    );
    assert!(e.to_string().contains(&format!("job {theirs}")), "{e}");
    // Nothing of it was applied: not the other job, not the completion.
    assert_eq!(state(&b, mine[0].id).await, None);
    assert_eq!(state(&b, r.id).await, Some(JobState::Running));
    // Run again, the transaction finds the key's holder.
    let mut tx = begin(&b).await;
    let out = enqueue(&mut *tx, vec![keyed("t", "k")]).await[0];
    assert_eq!(
        out,
        EnqueueOutcome {
            id: theirs,
            created: false
        }
    );
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_refused_enqueue_leaves_the_transaction_usable() {
    let b = MemoryBackend::new();
    let mut tx = begin(&b).await;
    let mut bad = job("t");
    bad.max_attempts = Some(0);
    constraint(tx.enqueue(vec![job("t"), bad], NOW).await);
    let id = enqueue(&mut *tx, vec![job("t")]).await[0].id;
    tx.commit().await.unwrap();
    assert_eq!(all_jobs(&b).await.len(), 1);
    assert_eq!(id, 1, "the refused batch spent no id");
}

#[tokio::test]
async fn the_transaction_downcasts_to_memory_tx() {
    let b = MemoryBackend::new();
    let mut tx = begin(&b).await;
    enqueue(&mut *tx, vec![job("t")]).await;
    let mem = tx
        .as_any_mut()
        .downcast_mut::<MemoryTx>()
        .expect("a MemoryTx");
    assert_eq!(
        format!("{mem:?}"),
        "MemoryTx { created: 1, completed: 0, .. }"
    );
}
