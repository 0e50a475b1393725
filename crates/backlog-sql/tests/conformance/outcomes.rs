//! Outcomes: completion under each retention, complete-and-claim, fencing by lease token, failure and retries, release and heartbeat, rescue.

use super::*;

pub(crate) async fn completion_retention(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("r", "1"), job("r", "2"), job("r", "3")], now).await;
    let c =
        db.b.job_claim(&claim("r", 3, now, db.strategy()))
            .await
            .unwrap();
    let by_id = |i: i64| c.iter().find(|x| x.id == i).unwrap().job_ref();
    assert_eq!(
        complete(&db, vec![by_id(id[0])], now + 1, Retention::Delete)
            .await
            .len(),
        1
    );
    assert!(db.b.job_get(id[0]).await.unwrap().is_none());
    assert_eq!(
        complete(&db, vec![by_id(id[1])], now + 2, Retention::Keep)
            .await
            .len(),
        1
    );
    let kept = db.b.job_get(id[1]).await.unwrap().unwrap();
    assert_eq!(
        (kept.state, kept.finished_at, kept.lease_token),
        (JobState::Completed, Some(now + 2), None)
    );
    assert_eq!(
        complete(&db, vec![by_id(id[2])], now + 3, Retention::Archive)
            .await
            .len(),
        1
    );
    // Moved out of the hot table; `job_get` still finds it in the archive.
    assert_eq!(db.archived(id[2]).await, Some("completed".to_string()));
    assert_eq!(state_of(&db, id[2]).await, JobState::Completed);
    let archived = db.b.job_get(id[2]).await.unwrap().unwrap();
    assert!(archived.archived, "a job read from the archive says so");
    assert!(!kept.archived, "a kept job is not archived");
    assert_eq!(pending(&db, &["r"]).await, 0);
    // A completed job is never handed out again.
    assert!(
        db.b.job_claim(&claim("r", 3, now + 10 * SEC, db.strategy()))
            .await
            .unwrap()
            .is_empty()
    );
    // Completing twice changes nothing.
    assert!(
        complete(&db, vec![by_id(id[1])], now + 4, Retention::Keep)
            .await
            .is_empty()
    );
}

/// Every retention, each with the hint that the claim will find jobs and without it (a backend
/// may take another statement for each; the outcome must be the same).
pub(crate) fn retentions_and_hints() -> Vec<(Retention, bool)> {
    [Retention::Delete, Retention::Keep, Retention::Archive]
        .into_iter()
        .flat_map(|r| [(r, false), (r, true)])
        .collect()
}

pub(crate) async fn complete_claim_completes_then_claims(db: Db) {
    let now = db.now;
    for strategy in db.strategies() {
        for (retention, expect_jobs) in retentions_and_hints() {
            let qn = format!(
                "cc-{}-{retention:?}-{expect_jobs}",
                harness::strategy_name(strategy)
            );
            let id = ids(&db, (0..7).map(|i| job(&qn, &i.to_string())).collect(), now).await;
            let first = db.b.job_claim(&claim(&qn, 3, now, strategy)).await.unwrap();
            assert_eq!(first.iter().map(|c| c.id).collect::<Vec<_>>(), id[..3]);
            // The three finished jobs, and a stale lease of the first one, which must not count.
            let mut refs: Vec<JobRef> = first.iter().map(|c| c.job_ref()).collect();
            let stale = JobRef {
                id: id[3],
                token: 12345,
            };
            refs.push(stale);
            let r =
                db.b.job_complete_claim(JobCompleteClaimParams {
                    complete: JobCompleteParams {
                        jobs: refs,
                        now: now + 1,
                        retention,
                    },
                    claim: claim(&qn, 3, now + 1, strategy),
                    expect_jobs,
                    groups: vec![],
                })
                .await
                .unwrap();
            let mut done: Vec<i64> = r.completed.iter().map(|j| j.id).collect();
            done.sort_unstable();
            assert_eq!(done, id[..3], "{strategy:?} {retention:?} {expect_jobs}");
            let next = r.claimed.unwrap();
            assert_eq!(
                next.iter().map(|c| c.id).collect::<Vec<_>>(),
                id[3..6],
                "{strategy:?} {retention:?} {expect_jobs}: the next jobs in order"
            );
            assert!(next.iter().all(|c| c.attempt == 1 && c.lease_token != 0));
            for &i in &id[..3] {
                match retention {
                    Retention::Delete => assert!(db.b.job_get(i).await.unwrap().is_none()),
                    Retention::Keep => {
                        let j = db.b.job_get(i).await.unwrap().unwrap();
                        assert_eq!(
                            (j.state, j.finished_at),
                            (JobState::Completed, Some(now + 1))
                        );
                    }
                    Retention::Archive => {
                        assert_eq!(db.archived(i).await, Some("completed".to_string()))
                    }
                }
            }
            // The stale token changed nothing: the job is running under its new lease.
            assert_eq!(state_of(&db, id[3]).await, JobState::Running);
            // Nothing to complete: a plain claim. A paused queue: completions, but no claim.
            let r =
                db.b.job_complete_claim(JobCompleteClaimParams {
                    complete: JobCompleteParams {
                        jobs: vec![],
                        now: now + 2,
                        retention,
                    },
                    claim: claim(&qn, 5, now + 2, strategy),
                    expect_jobs,
                    groups: vec![],
                })
                .await
                .unwrap();
            assert!(r.completed.is_empty());
            let last = r.claimed.unwrap();
            assert_eq!(last.iter().map(|c| c.id).collect::<Vec<_>>(), id[6..]);
            db.b.queue_set_paused(&q(&qn), true, now).await.unwrap();
            let mut refs: Vec<JobRef> = next.iter().map(|c| c.job_ref()).collect();
            refs.extend(last.iter().map(|c| c.job_ref()));
            enqueue(&db, vec![job(&qn, "8")], now).await;
            let r =
                db.b.job_complete_claim(JobCompleteClaimParams {
                    complete: JobCompleteParams {
                        jobs: refs,
                        now: now + 3,
                        retention,
                    },
                    claim: claim(&qn, 5, now + 3, strategy),
                    expect_jobs,
                    groups: vec![],
                })
                .await
                .unwrap();
            assert_eq!(
                r.completed.len(),
                4,
                "{strategy:?} {retention:?} {expect_jobs}"
            );
            assert!(
                r.claimed.unwrap().is_empty(),
                "a paused queue hands out nothing"
            );
            assert_eq!(pending(&db, &[&qn]).await, 1);
        }
    }
}

/// The jobs of one claim share its token, and a completion of them alone compares each row with
/// that one token (the PostgreSQL statement takes a cheaper form then): a job among them whose
/// lease was lost, and which runs again under a new claim, is still left alone, by the plain
/// completion and by complete-and-claim.
pub(crate) async fn one_claims_batch_is_fenced_job_by_job(db: Db) {
    let now = db.now;
    for strategy in db.strategies() {
        for (retention, expect_jobs) in retentions_and_hints() {
            let qn = format!(
                "one-{}-{retention:?}-{expect_jobs}",
                harness::strategy_name(strategy)
            );
            let id = ids(&db, (0..6).map(|i| job(&qn, &i.to_string())).collect(), now).await;
            let first = db.b.job_claim(&claim(&qn, 4, now, strategy)).await.unwrap();
            let refs: Vec<JobRef> = first.iter().map(|c| c.job_ref()).collect();
            assert!(
                refs.iter().all(|r| r.token == refs[0].token),
                "one claim, one token"
            );
            // Job 0's attempt fails, with a retry due before the others, and the next claim
            // takes it: it runs again, under a new token.
            db.b.job_fail(JobFailParams {
                job: refs[0],
                now: now + 1,
                error: "x".into(),
                cancelled: false,
                retry_at: Some(now - SEC),
            })
            .await
            .unwrap();
            let again =
                db.b.job_claim(&claim(&qn, 1, now + 1, strategy))
                    .await
                    .unwrap();
            assert_eq!((again[0].id, again[0].attempt), (id[0], 2));
            let done = complete(&db, refs[..2].to_vec(), now + 2, retention).await;
            assert_eq!(
                done,
                vec![refs[1]],
                "{strategy:?} {retention:?} {expect_jobs}: plain completion"
            );
            let r =
                db.b.job_complete_claim(JobCompleteClaimParams {
                    complete: JobCompleteParams {
                        jobs: vec![refs[0], refs[2], refs[3]],
                        now: now + 3,
                        retention,
                    },
                    claim: claim(&qn, 5, now + 3, strategy),
                    expect_jobs,
                    groups: vec![],
                })
                .await
                .unwrap();
            let mut done: Vec<i64> = r.completed.iter().map(|j| j.id).collect();
            done.sort_unstable();
            assert_eq!(
                done,
                id[2..4],
                "{strategy:?} {retention:?} {expect_jobs}: complete and claim"
            );
            let next: Vec<i64> = r.claimed.unwrap().iter().map(|c| c.id).collect();
            assert_eq!(next, id[4..], "{strategy:?} {retention:?} {expect_jobs}");
            let j = db.b.job_get(id[0]).await.unwrap().unwrap();
            assert_eq!(
                (j.state, j.lease_token),
                (JobState::Running, Some(again[0].lease_token)),
                "{strategy:?} {retention:?} {expect_jobs}: the new attempt is untouched"
            );
        }
    }
}

pub(crate) async fn fencing_after_lease_takeover(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("f", "{}")], now).await[0];
    let mut p = claim("f", 1, now, db.strategy());
    p.lease = Duration::from_secs(1);
    let old = db.b.job_claim(&p).await.unwrap()[0].job_ref();
    // Not expired yet: nothing to rescue.
    assert_eq!(
        db.b.job_rescue(JobRescueParams {
            now: now + SEC / 2,
            limit: 100
        })
        .await
        .unwrap()
        .len(),
        0
    );
    let later = now + 2 * SEC;
    assert_eq!(
        db.b.job_rescue(JobRescueParams {
            now: later,
            limit: 100
        })
        .await
        .unwrap()
        .len(),
        1
    );
    let rescued = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!((rescued.state, rescued.attempt), (JobState::Available, 1));
    assert!(
        rescued.errors[0].error.contains("lease expired"),
        "{:?}",
        rescued.errors
    );
    let new =
        db.b.job_claim(&claim("f", 1, later, db.strategy()))
            .await
            .unwrap()[0]
            .clone();
    assert_eq!((new.id, new.attempt), (id, 2));
    assert_ne!(new.lease_token, old.token);
    // The old holder can do nothing.
    assert!(
        complete(&db, vec![old], later, Retention::Keep)
            .await
            .is_empty()
    );
    let lost = |r: Result<()>| {
        assert!(
            matches!(r, Err(Error::LeaseLost { job_id }) if job_id == id),
            "{r:?}"
        )
    };
    lost(
        db.b.job_fail(JobFailParams {
            job: old,
            now: later,
            error: "x".into(),
            cancelled: false,
            retry_at: Some(later),
        })
        .await,
    );
    lost(
        db.b.job_heartbeat(JobHeartbeatParams {
            job: old,
            lease_expires_at: later + 100 * SEC,
        })
        .await
        .map(|_| ()),
    );
    lost(
        db.b.job_release(JobReleaseParams {
            job: old,
            now: later,
            run_at: later,
        })
        .await,
    );
    let j = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!(
        (j.state, j.lease_token, j.errors.len()),
        (JobState::Running, Some(new.lease_token), 1)
    );
    // The current holder completes.
    assert_eq!(
        complete(&db, vec![new.job_ref()], later, Retention::Keep).await,
        vec![new.job_ref()]
    );
    lost(
        db.b.job_heartbeat(JobHeartbeatParams {
            job: new.job_ref(),
            lease_expires_at: later,
        })
        .await
        .map(|_| ()),
    );
}

pub(crate) async fn fail_retries_then_dies(db: Db) {
    let now = db.now;
    let mut j = job("fl", "{}");
    j.max_attempts = Some(2);
    let id = ids(&db, vec![j], now).await[0];
    let c =
        db.b.job_claim(&claim("fl", 1, now, db.strategy()))
            .await
            .unwrap()[0]
            .job_ref();
    db.b.job_fail(JobFailParams {
        job: c,
        now,
        error: "boom 1".into(),
        cancelled: false,
        retry_at: Some(now + 5 * SEC),
    })
    .await
    .unwrap();
    let st = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!(
        (st.state, st.run_at, st.reported_state(now)),
        (JobState::Available, now + 5 * SEC, "retrying")
    );
    assert_eq!(
        st.errors,
        vec![ErrorRecord {
            attempt: 1,
            at: now,
            error: "boom 1".into()
        }]
    );
    let listed =
        db.b.job_list(JobListParams {
            queue: Some(q("fl")),
            state: Some(StateFilter::Retrying),
            kind: None,
            unique_key: None,
            after_id: 0,
            limit: 10,
            now,
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        db.b.job_claim(&claim("fl", 1, now + SEC, db.strategy()))
            .await
            .unwrap()
            .is_empty()
    );
    let t = now + 5 * SEC;
    let c =
        db.b.job_claim(&claim("fl", 1, t, db.strategy()))
            .await
            .unwrap()[0]
            .clone();
    assert_eq!(c.attempt, 2);
    db.b.job_fail(JobFailParams {
        job: c.job_ref(),
        now: t,
        error: "boom 2".into(),
        cancelled: false,
        retry_at: None,
    })
    .await
    .unwrap();
    let st = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!(
        (st.state, st.finished_at, st.errors.len()),
        (JobState::Dead, Some(t), 2)
    );
    assert_eq!(st.errors[1].error, "boom 2");
}

pub(crate) async fn release_and_heartbeat(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("rh", "{}")], now).await[0];
    let c =
        db.b.job_claim(&claim("rh", 1, now, db.strategy()))
            .await
            .unwrap()[0]
            .job_ref();
    db.b.job_release(JobReleaseParams {
        job: c,
        now,
        run_at: now + 3 * SEC,
    })
    .await
    .unwrap();
    let j = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!(
        (j.state, j.attempt, j.run_at, j.lease_token),
        (JobState::Available, 0, now + 3 * SEC, None)
    );
    let t = now + 3 * SEC;
    let mut p = claim("rh", 1, t, db.strategy());
    p.lease = Duration::from_secs(1);
    let c = db.b.job_claim(&p).await.unwrap()[0].clone();
    assert_eq!(c.attempt, 1);
    db.b.job_heartbeat(JobHeartbeatParams {
        job: c.job_ref(),
        lease_expires_at: t + 60 * SEC,
    })
    .await
    .unwrap();
    assert_eq!(
        db.b.job_rescue(JobRescueParams {
            now: t + 10 * SEC,
            limit: 10
        })
        .await
        .unwrap()
        .len(),
        0
    );
    assert_eq!(state_of(&db, id).await, JobState::Running);
}

pub(crate) async fn rescue_of_last_attempt_is_dead(db: Db) {
    let now = db.now;
    let mut s = QueueSettings::defaults(q("rd"));
    s.max_attempts = 1;
    db.b.queue_upsert(&s, now).await.unwrap();
    let id = ids(&db, vec![job("rd", "{}")], now).await[0];
    let mut p = claim("rd", 1, now, db.strategy());
    p.lease = Duration::from_secs(1);
    db.b.job_claim(&p).await.unwrap();
    assert_eq!(
        db.b.job_rescue(JobRescueParams {
            now: now + 5 * SEC,
            limit: 10
        })
        .await
        .unwrap()
        .len(),
        1
    );
    let j = db.b.job_get(id).await.unwrap().unwrap();
    assert_eq!((j.state, j.errors.len()), (JobState::Dead, 1));
}

/// A batch limit holds whatever plan the database picks: a rescue or redrive of 2 moves 2 of 3.
pub(crate) async fn rescue_and_redrive_stay_within_their_limit(db: Db) {
    let now = db.now;
    let mut s = QueueSettings::defaults(q("lim"));
    s.max_attempts = 1;
    db.b.queue_upsert(&s, now).await.unwrap();
    let id = ids(
        &db,
        vec![job("lim", "{}"), job("lim", "{}"), job("lim", "{}")],
        now,
    )
    .await;
    let mut p = claim("lim", 3, now, db.strategy());
    p.lease = Duration::from_secs(1);
    assert_eq!(db.b.job_claim(&p).await.unwrap().len(), 3);
    let rescue = |limit| {
        db.b.job_rescue(JobRescueParams {
            now: now + 5 * SEC,
            limit,
        })
    };
    assert_eq!(rescue(2).await.unwrap().len(), 2);
    assert_eq!(rescue(2).await.unwrap().len(), 1);
    for id in &id {
        assert_eq!(state_of(&db, *id).await, JobState::Dead);
    }
    let redrive = |limit| {
        db.b.queue_redrive(QueueRedriveParams {
            queue: q("lim"),
            limit,
            now: now + 6 * SEC,
        })
    };
    assert_eq!(redrive(2).await.unwrap(), 2);
    assert_eq!(state_of(&db, id[2]).await, JobState::Dead, "oldest first");
    assert_eq!(redrive(2).await.unwrap(), 1);
}
