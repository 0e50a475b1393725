//! Transaction claim mode: a claim that writes nothing until its transaction ends, alone and in batches, and never stalls others.

use super::*;

pub(crate) async fn transaction_claim_mode(db: Db) {
    let now = db.now;
    if !db.b.capabilities().row_locks {
        let r = db.b.job_claim_tx(&claim("tx", 1, now, db.strategy())).await;
        assert!(matches!(r, Err(Error::Unsupported(_))));
        return;
    }
    let id = ids(&db, vec![job("tx", "1"), job("tx", "2")], now).await;
    let held =
        db.b.job_claim_tx(&claim("tx", 1, now, db.strategy()))
            .await
            .unwrap()
            .expect("a job");
    assert_eq!(held.job().id, id[0]);
    // The row lock hides it from other claimers, who get the next job.
    let other =
        db.b.job_claim(&claim("tx", 5, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(other.iter().map(|c| c.id).collect::<Vec<_>>(), vec![id[1]]);
    // Dropping the transaction (a dead connection) frees the job at once, no attempt used.
    drop(held);
    let mut again = None;
    for _ in 0..100 {
        if let Some(t) =
            db.b.job_claim_tx(&claim("tx", 1, now, db.strategy()))
                .await
                .unwrap()
        {
            again = Some(t);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = again.expect("job free again after the transaction dropped");
    assert_eq!((again.job().id, again.job().attempt), (id[0], 1));
    again.complete(now, Retention::Keep).await.unwrap();
    assert_eq!(state_of(&db, id[0]).await, JobState::Completed);
    let t =
        db.b.job_claim_tx(&claim("tx", 1, now, db.strategy()))
            .await
            .unwrap();
    assert!(t.is_none(), "job 2 is running, nothing else is available");
}

/// Transaction claim mode in batches: one transaction locks several jobs and writes nothing to
/// them until it ends, when each is completed, failed, leased to run on, or let go as if never
/// claimed; a finish naming a job twice, or one the claim does not hold, changes nothing.
pub(crate) async fn transaction_claims_in_batches(db: Db) {
    if !db.b.capabilities().row_locks {
        return; // no transaction claim mode (transaction_claim_mode checks the refusal)
    }
    let now = db.now;
    let (later, retry_at) = (now + SEC, now + 60 * SEC);
    for retention in [Retention::Keep, Retention::Delete, Retention::Archive] {
        let qn = format!("txb_{retention:?}").to_lowercase();
        let jobs = (0..6).map(|i| job(&qn, &i.to_string())).collect();
        let id = ids(&db, jobs, now).await;
        let held =
            db.b.job_claim_tx(&claim(&qn, 5, now, db.strategy()))
                .await
                .unwrap()
                .expect("jobs");
        let got: Vec<i64> = held.jobs().iter().map(|j| j.id).collect();
        assert_eq!(got, id[..5], "FIFO, five of six");
        assert!(held.jobs().iter().all(|j| j.attempt == 1));
        // Nothing written while the transaction is open: other sessions see the jobs as they
        // were, and other claimers pass over them.
        let seen = db.b.job_get(id[0]).await.unwrap().unwrap();
        assert_eq!((seen.state, seen.attempt), (JobState::Available, 0));
        let other =
            db.b.job_claim(&claim(&qn, 10, now, db.strategy()))
                .await
                .unwrap();
        assert_eq!(other.iter().map(|c| c.id).collect::<Vec<_>>(), vec![id[5]]);
        let token = held.jobs()[3].lease_token;

        let mut finish = TxFinish::new(later, retention);
        finish.completed = vec![id[1], id[0]];
        finish.failed = vec![TxFailure {
            id: id[2],
            error: "boom".into(),
            retry_at: Some(retry_at),
        }];
        finish.leased = vec![id[3]];
        held.finish(finish).await.unwrap();

        for &done in &id[..2] {
            match retention {
                Retention::Delete => assert!(db.b.job_get(done).await.unwrap().is_none()),
                Retention::Keep => {
                    let j = db.b.job_get(done).await.unwrap().unwrap();
                    assert_eq!(
                        (j.state, j.attempt, j.attempted_at, j.finished_at),
                        (JobState::Completed, 1, Some(now), Some(later))
                    );
                    assert_eq!(j.lease_owner.as_deref(), Some("test-worker"));
                }
                Retention::Archive => {
                    assert_eq!(db.archived(done).await, Some("completed".to_string()))
                }
            }
        }
        let failed = db.b.job_get(id[2]).await.unwrap().unwrap();
        assert_eq!(
            (
                failed.state,
                failed.attempt,
                failed.run_at,
                failed.errors.len()
            ),
            (JobState::Available, 1, retry_at, 1)
        );
        let leased = db.b.job_get(id[3]).await.unwrap().unwrap();
        assert_eq!(
            (leased.state, leased.attempt, leased.lease_token),
            (JobState::Running, 1, Some(token))
        );
        let untouched = db.b.job_get(id[4]).await.unwrap().unwrap();
        assert_eq!(
            (untouched.state, untouched.attempt),
            (JobState::Available, 0)
        );
        // The leased job is completed as any claimed job, fenced by its token.
        let by_token = JobRef { id: id[3], token };
        assert_eq!(
            complete(&db, vec![by_token], later, retention).await.len(),
            1
        );

        // Bad input: the same job twice, or a job the claim does not hold. Refused, nothing
        // written, and the claim's jobs are free again.
        for bad in [vec![id[4], id[4]], vec![id[4], id[5]]] {
            let held =
                db.b.job_claim_tx(&claim(&qn, 5, later, db.strategy()))
                    .await
                    .unwrap()
                    .expect("the job left alone");
            assert_eq!(
                held.jobs().iter().map(|j| j.id).collect::<Vec<_>>(),
                vec![id[4]]
            );
            let mut finish = TxFinish::new(later, retention);
            finish.completed = bad;
            let err = held.finish(finish).await.unwrap_err();
            assert!(matches!(err, Error::OptionInvalid { .. }), "{err:?}");
            let j = db.b.job_get(id[4]).await.unwrap().unwrap();
            assert_eq!((j.state, j.attempt), (JobState::Available, 0));
        }
        // Rolled back: as if never claimed.
        let held =
            db.b.job_claim_tx(&claim(&qn, 5, later, db.strategy()))
                .await
                .unwrap()
                .expect("the job left alone");
        held.rollback().await.unwrap();
        let j = db.b.job_get(id[4]).await.unwrap().unwrap();
        assert_eq!((j.state, j.attempt), (JobState::Available, 0));
    }
}

/// A job held open in transaction claim mode past its lease must not stall anyone else: the
/// rescue that every claimer runs passes over its locked row (it used to wait on it on MariaDB,
/// stopping lease-mode claims on every queue until the lock wait timed out).
pub(crate) async fn transaction_claim_never_stalls_others(db: Db) {
    if !db.b.capabilities().row_locks {
        return; // no transaction claim mode (transaction_claim_mode checks the refusal)
    }
    let now = db.now;
    let held_id = ids(&db, vec![job("txheld", "{}")], now).await[0];
    let mut p = claim("txheld", 1, now, db.strategy());
    p.lease = Duration::from_secs(1);
    let held = db.b.job_claim_tx(&p).await.unwrap().expect("a job");
    // A lease-mode job whose worker died, and work waiting in another queue.
    let lost = ids(&db, vec![job("txlost", "{}")], now).await[0];
    let mut p = claim("txlost", 1, now, db.strategy());
    p.lease = Duration::from_secs(1);
    assert_eq!(db.b.job_claim(&p).await.unwrap().len(), 1);
    let waiting = ids(&db, vec![job("txother", "1"), job("txother", "2")], now).await;

    // Both leases have expired by now; the held row stays locked by its open transaction.
    let later = now + 5 * SEC;
    let bound = Duration::from_secs(10);
    let rescued = tokio::time::timeout(
        bound,
        db.b.job_rescue(JobRescueParams {
            now: later,
            limit: 100,
        }),
    )
    .await
    .expect("the rescue waited on the row a transaction claim holds")
    .unwrap()
    .len();
    assert_eq!(rescued, 1, "only the lease-mode job is rescued");
    assert_eq!(state_of(&db, lost).await, JobState::Available);
    for strategy in db.strategies() {
        let mut p = claim("txother", 10, later, strategy);
        p.lease = Duration::from_secs(30);
        let got = tokio::time::timeout(bound, db.b.job_claim(&p))
            .await
            .expect("a claim in another queue waited on the held row")
            .unwrap();
        let refs: Vec<JobRef> = got.iter().map(|c| c.job_ref()).collect();
        complete(&db, refs, later, Retention::Keep).await;
    }
    for id in waiting {
        assert_eq!(state_of(&db, id).await, JobState::Completed);
    }
    // The transaction still owns its job and completes it.
    held.complete(later, Retention::Keep).await.unwrap();
    assert_eq!(state_of(&db, held_id).await, JobState::Completed);
}
