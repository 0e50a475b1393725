//! Dependencies (schema version 20, issue 47): a job that waits for other jobs is `waiting`
//! until every parent has ended, and is released in the transaction that ends the last of them,
//! whichever way it ends (a completion under each retention, complete-and-claim, a failure, a
//! rescue, an operator's cancel or delete, the caller's own transaction); a parent that fails
//! cancels the children whose policy says so, and they theirs.

use super::*;

/// Claims well after `now`: a released job is due no earlier than the database's time of its
/// release, a little after the test's `now`.
const LATER: i64 = 60 * SEC;

fn after(queue: &str, parents: &[i64]) -> NewJob {
    parents.iter().fold(job(queue, "{}"), |j, &p| {
        j.after_with(p, OnParentFailure::Cancel)
    })
}

async fn waiting(db: &Db, id: i64) -> (JobState, i32) {
    let j = db.b.job_get(id).await.unwrap().expect("job exists");
    (j.state, j.deps_left)
}

/// Claims every due job of `queue` (once released, a child is due by `now + LATER`).
async fn claim_all(db: &Db, queue: &str, now: i64) -> Vec<ClaimedJob> {
    db.b.job_claim(&claim(queue, 100, now + LATER, db.strategy()))
        .await
        .unwrap()
}

async fn fail_dead(db: &Db, r: JobRef, now: i64) {
    db.b.job_fail(JobFailParams {
        job: r,
        now,
        error: "boom".into(),
        retry_at: None,
        cancelled: false,
    })
    .await
    .unwrap();
}

pub(crate) async fn a_child_waits_for_every_parent(db: Db) {
    let now = db.now;
    for retention in [Retention::Delete, Retention::Keep, Retention::Archive] {
        let qn = format!("deps-wait-{retention:?}");
        let parents = ids(&db, vec![job(&qn, "1"), job(&qn, "2")], now).await;
        let child = ids(&db, vec![after(&qn, &parents)], now).await[0];
        assert_eq!(waiting(&db, child).await, (JobState::Waiting, 2));
        // Only the parents are handed out.
        let c = claim_all(&db, &qn, now).await;
        let mut got: Vec<i64> = c.iter().map(|x| x.id).collect();
        got.sort_unstable();
        assert_eq!(got, parents, "{retention:?}");
        complete(&db, vec![c[0].job_ref()], now + 1, retention).await;
        assert_eq!(waiting(&db, child).await, (JobState::Waiting, 1));
        assert!(claim_all(&db, &qn, now).await.is_empty());
        complete(&db, vec![c[1].job_ref()], now + 2, retention).await;
        assert_eq!(waiting(&db, child).await, (JobState::Available, 0));
        let c = claim_all(&db, &qn, now).await;
        assert_eq!(c.iter().map(|x| x.id).collect::<Vec<_>>(), [child]);
        assert_eq!(pending(&db, &[&qn]).await, 1);
    }
}

pub(crate) async fn a_fan_in_is_released_once_by_its_last_parent(db: Db) {
    let now = db.now;
    let qn = "deps-fan-in";
    let parents = ids(
        &db,
        (0..150).map(|i| job(qn, &i.to_string())).collect(),
        now,
    )
    .await;
    let child = ids(&db, vec![after(qn, &parents)], now).await[0];
    assert_eq!(waiting(&db, child).await, (JobState::Waiting, 150));
    // Complete in batches, as a worker does, with complete-and-claim where the backend has it.
    let mut claimed = claim_all(&db, qn, now).await;
    let mut done = 0;
    while !claimed.is_empty() {
        let batch: Vec<JobRef> = claimed.iter().map(|c| c.job_ref()).collect();
        let got =
            db.b.job_complete_claim(JobCompleteClaimParams {
                complete: JobCompleteParams {
                    jobs: batch,
                    now: now + 1,
                    retention: Retention::Delete,
                },
                claim: claim(qn, 40, now + LATER, db.strategy()),
                expect_jobs: true,
                groups: vec![],
            })
            .await
            .unwrap();
        done += got.completed.len();
        claimed = got.claimed.unwrap();
        if done < 150 {
            assert_eq!(
                waiting(&db, child).await,
                (JobState::Waiting, 150 - done as i32)
            );
            assert!(claimed.iter().all(|c| c.id != child));
        }
        if claimed.is_empty() && done < 151 {
            claimed = claim_all(&db, qn, now).await;
        }
    }
    assert_eq!(done, 151, "every parent and then the child, each once");
    assert!(
        db.b.job_get(child).await.unwrap().is_none(),
        "the child ran"
    );
}

pub(crate) async fn a_failed_parent_cancels_its_children_in_cascade(db: Db) {
    let now = db.now;
    let qn = "deps-cascade";
    let a = ids(&db, vec![job(qn, "\"a\"")], now).await[0];
    let b = ids(&db, vec![after(qn, &[a])], now).await[0];
    let c = ids(&db, vec![after(qn, &[b])], now).await[0];
    let ignore = ids(
        &db,
        vec![job(qn, "{}").after_with(a, OnParentFailure::Ignore)],
        now,
    )
    .await[0];
    let run = ids(
        &db,
        vec![job(qn, "{}").after_with(a, OnParentFailure::Run)],
        now,
    )
    .await[0];
    let claimed = claim_all(&db, qn, now).await;
    assert_eq!(claimed.iter().map(|x| x.id).collect::<Vec<_>>(), [a]);
    fail_dead(&db, claimed[0].job_ref(), now + 1).await;
    assert_eq!(state_of(&db, a).await, JobState::Dead);
    for id in [b, c] {
        let j = db.b.job_get(id).await.unwrap().unwrap();
        assert_eq!(j.state, JobState::Cancelled, "job {id}");
        assert!(j.finished_at.is_some());
    }
    let b_job = db.b.job_get(b).await.unwrap().unwrap();
    assert!(
        b_job.errors[0].error.contains(&format!("job {a}"))
            && b_job.errors[0].error.contains("dead"),
        "{:?}",
        b_job.errors
    );
    let c_job = db.b.job_get(c).await.unwrap().unwrap();
    assert!(
        c_job.errors[0].error.contains(&format!("job {b}")),
        "{:?}",
        c_job.errors
    );
    // The other policies run once their parent has ended, whatever its outcome.
    assert_eq!(waiting(&db, ignore).await, (JobState::Available, 0));
    assert_eq!(waiting(&db, run).await, (JobState::Available, 0));
    let mut got: Vec<i64> = claim_all(&db, qn, now).await.iter().map(|x| x.id).collect();
    got.sort_unstable();
    assert_eq!(got, [ignore, run]);
}

pub(crate) async fn parents_that_ended_already_or_never_were(db: Db) {
    let now = db.now;
    let qn = "deps-ended";
    let p = ids(&db, vec![job(qn, "1"), job(qn, "2")], now).await;
    let c = claim_all(&db, qn, now).await;
    let by_id = |i: i64| c.iter().find(|x| x.id == i).unwrap().job_ref();
    complete(&db, vec![by_id(p[0])], now + 1, Retention::Keep).await;
    fail_dead(&db, by_id(p[1]), now + 1).await;
    let out = ids(
        &db,
        vec![
            after(qn, &[p[0]]),
            after(qn, &[p[1]]),
            job(qn, "{}").after_with(p[1], OnParentFailure::Ignore),
        ],
        now + 2,
    )
    .await;
    assert_eq!(waiting(&db, out[0]).await, (JobState::Available, 0));
    let doomed = db.b.job_get(out[1]).await.unwrap().unwrap();
    assert_eq!(doomed.state, JobState::Cancelled);
    assert!(doomed.errors[0].error.contains(&format!("job {}", p[1])));
    assert_eq!(waiting(&db, out[2]).await, (JobState::Available, 0));

    // A parent that is no job: refused, and nothing of the batch is written.
    let before = pending(&db, &[qn]).await;
    let err =
        db.b.job_insert(JobInsertParams {
            jobs: vec![job(qn, "{}"), after(qn, &[p[0], 987_654_321])],
            now,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ParentNotFound {
                parent: 987_654_321
            }
        ),
        "{err}"
    );
    assert_eq!(pending(&db, &[qn]).await, before);
}

pub(crate) async fn bad_dependencies_change_nothing(db: Db) {
    let now = db.now;
    let qn = "deps-bad";
    let p = ids(&db, vec![job(qn, "1")], now).await[0];
    let grouped = after(qn, &[p]).in_group(GroupKey::new("g").unwrap());
    let mut many = job(qn, "{}");
    for i in 0..=MAX_PARENTS as i64 {
        many = many.after(p + i);
    }
    for (bad, want) in [
        (job(qn, "{}").after(p).after(p), "named twice"),
        (job(qn, "{}").after(0), "not a job id"),
        (grouped, "ordered group"),
        (many, "parents of one job"),
    ] {
        let err =
            db.b.job_insert(JobInsertParams {
                jobs: vec![job(qn, "{}"), bad],
                now,
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    }
    assert_eq!(pending(&db, &[qn]).await, 1, "only the parent");
}

pub(crate) async fn operator_cancel_delete_and_rescue_end_parents(db: Db) {
    let now = db.now;
    let qn = "deps-operator";
    let p = ids(&db, vec![job(qn, "1"), job(qn, "2")], now).await;
    let kids = ids(
        &db,
        vec![
            job(qn, "{}").after_with(p[0], OnParentFailure::Ignore),
            after(qn, &[p[1]]),
        ],
        now,
    )
    .await;
    db.b.job_admin(p[0], AdminAction::Cancel, now + 1)
        .await
        .unwrap();
    assert_eq!(waiting(&db, kids[0]).await, (JobState::Available, 0));
    db.b.job_delete(p[1], now + 1).await.unwrap();
    assert_eq!(state_of(&db, kids[1]).await, JobState::Cancelled);

    // A lease that runs out on the last attempt ends the job dead: its children are cancelled.
    let qr = "deps-rescue";
    let mut last = job(qr, "{}");
    last.max_attempts = Some(1);
    let parent = ids(&db, vec![last], now).await[0];
    let child = ids(&db, vec![after(qr, &[parent])], now).await[0];
    let mut short = claim(qr, 1, now, db.strategy());
    short.lease = Duration::from_millis(1);
    assert_eq!(db.b.job_claim(&short).await.unwrap().len(), 1);
    db.b.job_rescue(JobRescueParams {
        now: now + 10 * SEC,
        limit: 100,
    })
    .await
    .unwrap();
    assert_eq!(state_of(&db, parent).await, JobState::Dead);
    assert_eq!(state_of(&db, child).await, JobState::Cancelled);

    // An operator's retry of a child cancelled by its parent: it waits again for the parents
    // not yet ended (here none: it is available).
    db.b.job_admin(child, AdminAction::Retry, now + 11 * SEC)
        .await
        .unwrap();
    assert_eq!(waiting(&db, child).await, (JobState::Available, 0));
}

pub(crate) async fn parents_completed_in_a_callers_transaction(db: Db) {
    let now = db.now;
    let qn = "deps-tx";
    let parent = ids(&db, vec![job(qn, "1")], now).await[0];
    let child = ids(&db, vec![after(qn, &[parent])], now).await[0];
    let c = claim_all(&db, qn, now).await;
    let mut tx = db.b.begin().await.unwrap();
    let done = tx
        .complete(&JobCompleteParams {
            jobs: vec![c[0].job_ref()],
            now: now + 1,
            retention: Retention::Keep,
        })
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    // A child enqueued in the same transaction, after a parent it completed: no wait.
    let late = tx
        .enqueue(vec![after(qn, &[parent])], now + 1)
        .await
        .unwrap()[0]
        .id;
    tx.commit().await.unwrap();
    assert_eq!(waiting(&db, child).await, (JobState::Available, 0));
    assert_eq!(waiting(&db, late).await, (JobState::Available, 0));
}

pub(crate) async fn parents_ending_at_once_release_their_child_once(db: Db) {
    let now = db.now;
    let qn = "deps-race";
    for round in 0..10 {
        let parents = ids(&db, vec![job(qn, "1"), job(qn, "2")], now).await;
        let child = ids(&db, vec![after(qn, &parents)], now).await[0];
        let c = claim_all(&db, qn, now).await;
        assert_eq!(c.len(), 2, "round {round}");
        let other = db.connect_again().await;
        let (a, b) = tokio::join!(
            db.b.job_complete(JobCompleteParams {
                jobs: vec![c[0].job_ref()],
                now: now + 1,
                retention: Retention::Delete,
            }),
            other.job_complete(JobCompleteParams {
                jobs: vec![c[1].job_ref()],
                now: now + 1,
                retention: Retention::Delete,
            }),
        );
        assert_eq!(a.unwrap().len() + b.unwrap().len(), 2);
        assert_eq!(
            waiting(&db, child).await,
            (JobState::Available, 0),
            "round {round}"
        );
        let c = claim_all(&db, qn, now).await;
        assert_eq!(c.iter().map(|x| x.id).collect::<Vec<_>>(), [child]);
        complete(&db, vec![c[0].job_ref()], now + 2, Retention::Delete).await;
    }
}
