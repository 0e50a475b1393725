//! While jobs run and around them: cancel requests, progress and results, pruning, leader election, cron, topics, and transactions the caller controls.

use super::*;

pub(crate) async fn heartbeat_reports_cancel_requests(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("cx", "{}"), job("cx", "{}")], now).await;
    let c =
        db.b.job_claim(&claim("cx", 1, now, db.strategy()))
            .await
            .unwrap()
            .remove(0);
    let hb = |at: i64| JobHeartbeatParams {
        job: c.job_ref(),
        lease_expires_at: at,
    };
    assert!(!db.b.job_heartbeat(hb(now + 60 * SEC)).await.unwrap());
    let j = db.b.job_cancel_request(c.id, now + 1).await.unwrap();
    assert_eq!(
        (j.state, j.cancel_requested_at),
        (JobState::Running, Some(now + 1))
    );
    assert!(
        db.b.job_heartbeat(hb(now + 61 * SEC)).await.unwrap(),
        "the worker must see the request"
    );
    let other = id.iter().copied().find(|&i| i != c.id).unwrap();
    assert!(matches!(
        db.b.job_cancel_request(other, now).await,
        Err(Error::JobStateConflict {
            state: JobState::Available,
            ..
        })
    ));
    assert!(matches!(
        db.b.job_cancel_request(987_654_321, now).await,
        Err(Error::JobNotFound { .. })
    ));
    // The worker reports the cancel outcome.
    db.b.job_fail(JobFailParams {
        job: c.job_ref(),
        now: now + 2,
        error: "cancelled on request".into(),
        retry_at: None,
        cancelled: true,
    })
    .await
    .unwrap();
    let j = db.b.job_get(c.id).await.unwrap().unwrap();
    assert_eq!(
        (j.state, j.finished_at),
        (JobState::Cancelled, Some(now + 2))
    );
}

pub(crate) async fn progress_and_result(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("pr", "{}")], now).await[0];
    let c =
        db.b.job_claim(&claim("pr", 1, now, db.strategy()))
            .await
            .unwrap()
            .remove(0);
    db.b.job_progress(JobProgressParams {
        job: c.job_ref(),
        progress: Some(r#"{"done":3,"of":10}"#.into()),
        result: None,
    })
    .await
    .unwrap();
    db.b.job_progress(JobProgressParams {
        job: c.job_ref(),
        progress: None,
        result: Some(r#"{"sent":true}"#.into()),
    })
    .await
    .unwrap();
    let j = db.b.job_get(id).await.unwrap().unwrap();
    let v = |s: &Option<String>| {
        serde_json::from_str::<serde_json::Value>(s.as_deref().unwrap()).unwrap()
    };
    assert_eq!(v(&j.progress)["done"], 3);
    assert_eq!(v(&j.result)["sent"], true);
    let stale = JobRef {
        id,
        token: c.lease_token.wrapping_add(1),
    };
    assert!(matches!(
        db.b.job_progress(JobProgressParams {
            job: stale,
            progress: Some("1".into()),
            result: None
        })
        .await,
        Err(Error::LeaseLost { .. })
    ));
    complete(&db, vec![c.job_ref()], now, Retention::Archive).await;
    let archived =
        db.b.job_get(id)
            .await
            .unwrap()
            .expect("job show finds archived jobs");
    assert_eq!(
        (archived.state, v(&archived.result)["sent"].clone()),
        (JobState::Completed, serde_json::json!(true))
    );
}

pub(crate) async fn pruning_in_bounded_batches(db: Db) {
    let now = db.now;
    let id = ids(&db, (0..4).map(|_| job("pn", "{}")).collect(), now).await;
    let c =
        db.b.job_claim(&claim("pn", 4, now, db.strategy()))
            .await
            .unwrap();
    for (i, cj) in c.iter().enumerate() {
        complete(&db, vec![cj.job_ref()], now + i as i64, Retention::Keep).await;
    }
    let prune = |limit: u32, archive: bool| JobPruneParams {
        queue: q("pn"),
        state: JobState::Completed,
        finished_before: now + 3,
        limit,
        archive,
    };
    assert_eq!(db.b.job_prune(prune(2, false)).await.unwrap(), 2);
    assert_eq!(db.b.job_prune(prune(10, true)).await.unwrap(), 1);
    assert_eq!(db.b.job_prune(prune(10, false)).await.unwrap(), 0);
    let left: Vec<i64> = c.iter().map(|x| x.id).filter(|&i| i == c[3].id).collect();
    let remaining =
        db.b.job_list(JobListParams {
            queue: Some(q("pn")),
            state: None,
            kind: None,
            unique_key: None,
            after_id: 0,
            limit: 10,
            now,
        })
        .await
        .unwrap();
    assert_eq!(remaining.iter().map(|j| j.id).collect::<Vec<_>>(), left);
    assert_eq!(db.archived(c[2].id).await.as_deref(), Some("completed"));
    assert_eq!(id.len(), 4);
}

pub(crate) async fn leader_election(db: Db) {
    let now = db.now;
    let p = |holder: &str, at: i64| LeaderParams {
        name: "maint".into(),
        holder: holder.into(),
        now: at,
        expires_at: at + 10 * SEC,
    };
    assert_eq!(db.b.leader_elect(&p("a", now)).await.unwrap(), Some(1));
    assert_eq!(db.b.leader_elect(&p("b", now + SEC)).await.unwrap(), None);
    assert_eq!(
        db.b.leader_elect(&p("a", now + 5 * SEC)).await.unwrap(),
        Some(1),
        "renewal keeps the term"
    );
    assert_eq!(
        db.b.leader_elect(&p("b", now + 14 * SEC)).await.unwrap(),
        None,
        "a's renewed lease still holds"
    );
    assert_eq!(
        db.b.leader_elect(&p("b", now + 16 * SEC)).await.unwrap(),
        Some(2),
        "b takes over an expired lease"
    );
    assert_eq!(
        db.b.leader_elect(&p("a", now + 17 * SEC)).await.unwrap(),
        None
    );
    db.b.leader_resign("maint", "a").await.unwrap(); // not the holder: no effect
    assert_eq!(
        db.b.leader_elect(&p("a", now + 18 * SEC)).await.unwrap(),
        None
    );
    db.b.leader_resign("maint", "b").await.unwrap();
    assert_eq!(
        db.b.leader_elect(&p("a", now + 19 * SEC)).await.unwrap(),
        Some(3)
    );
    // Many contenders at once: exactly one wins.
    let mut handles = vec![];
    for i in 0..8 {
        let b = db.b.clone();
        let lp = LeaderParams {
            name: "race".into(),
            holder: format!("h{i}"),
            now,
            expires_at: now + 10 * SEC,
        };
        handles.push(tokio::spawn(
            async move { b.leader_elect(&lp).await.unwrap() },
        ));
    }
    let mut wins = 0;
    for h in handles {
        wins += h.await.unwrap().is_some() as usize;
    }
    assert_eq!(wins, 1);
}

pub(crate) async fn cron_ticks_fire_once(db: Db) {
    let now = db.now;
    let fire = |tick: i64| CronFireParams {
        name: "nightly".into(),
        tick,
        job: job("cron", &format!(r#"{{"tick":{tick}}}"#)),
        now,
    };
    assert!(db.b.cron_fire(fire(100)).await.unwrap().unwrap().created);
    assert!(db.b.cron_fire(fire(100)).await.unwrap().is_none());
    assert!(db.b.cron_fire(fire(50)).await.unwrap().is_none());
    assert!(db.b.cron_fire(fire(200)).await.unwrap().is_some());
    let mut handles = vec![];
    for _ in 0..8 {
        let b = db.b.clone();
        let p = fire(300);
        handles.push(tokio::spawn(async move { b.cron_fire(p).await.unwrap() }));
    }
    let mut fired = 0;
    for h in handles {
        fired += h.await.unwrap().is_some() as usize;
    }
    assert_eq!(fired, 1, "one tick fired more than once");
    let stats = db.b.queue_stats(Some(&q("cron")), now).await.unwrap();
    assert_eq!(stats[0].1.available, 3);

    // Declared schedules: what each is sits beside its last tick, which a declaration never
    // moves; a schedule declared before it ever fired has fired none, and then fires.
    let declared = |name: &str, next_tick| CronSchedule {
        name: name.into(),
        schedule: Some("every 1m".into()),
        queue: Some("cron".into()),
        kind: None,
        last_tick: 999_999,
        next_tick: Some(next_tick),
        declared_at: Some(now),
    };
    db.b.cron_declare(&[declared("nightly", 400), declared("hourly", 60)])
        .await
        .unwrap();
    db.b.cron_declare(&[CronSchedule {
        kind: Some("report".into()),
        ..declared("hourly", 120)
    }])
    .await
    .unwrap();
    let list = db.b.cron_list().await.unwrap();
    assert_eq!(
        list.iter()
            .map(|c| (c.name.as_str(), c.last_tick, c.next_tick, c.kind.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("hourly", 0, Some(120), Some("report")),
            ("nightly", 300, Some(400), None)
        ]
    );
    assert_eq!(
        (
            list[1].schedule.as_deref(),
            list[1].queue.as_deref(),
            list[1].declared_at
        ),
        (Some("every 1m"), Some("cron"), Some(now))
    );
    let hourly = CronFireParams {
        name: "hourly".into(),
        ..fire(60)
    };
    assert!(db.b.cron_fire(hourly).await.unwrap().is_some());
    assert_eq!(db.b.cron_list().await.unwrap()[0].last_tick, 60);
}

pub(crate) async fn topic_subscriptions(db: Db) {
    let now = db.now;
    let (t, a, b) = (q("orders"), q("billing"), q("shipping"));
    db.b.topic_subscribe(&t, &b, true, now).await.unwrap();
    db.b.topic_subscribe(&t, &a, true, now).await.unwrap();
    db.b.topic_subscribe(&t, &a, true, now).await.unwrap();
    assert_eq!(
        db.b.topic_subscribers(&t).await.unwrap(),
        vec![a.clone(), b.clone()]
    );
    db.b.topic_subscribe(&t, &b, false, now).await.unwrap();
    assert_eq!(db.b.topic_subscribers(&t).await.unwrap(), vec![a]);
    assert!(
        db.b.topic_subscribers(&q("nobody"))
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn transactions_the_caller_controls(db: Db) {
    let now = db.now;
    // Enqueue inside a transaction: the job exists only if it commits.
    let mut tx = backlog_sql::JobTx::begin(db.b.as_ref()).await.unwrap();
    let rolled = tx.enqueue(vec![job("txq", "1")], now).await.unwrap()[0].id;
    tx.rollback().await.unwrap();
    assert!(db.b.job_get(rolled).await.unwrap().is_none());
    let mut tx = backlog_sql::JobTx::begin(db.b.as_ref()).await.unwrap();
    let kept = tx.enqueue(vec![job("txq", "2")], now).await.unwrap()[0].id;
    tx.commit().await.unwrap();
    assert_eq!(state_of(&db, kept).await, JobState::Available);
    // Complete in the same commit as the handler's own writes (here: a follow-up job).
    let c =
        db.b.job_claim(&claim("txq", 1, now, db.strategy()))
            .await
            .unwrap()
            .remove(0);
    let mut tx = backlog_sql::JobTx::begin(db.b.as_ref()).await.unwrap();
    let follow = tx.enqueue(vec![job("txq-out", "3")], now).await.unwrap()[0].id;
    tx.complete(JobCompleteParams {
        jobs: vec![c.job_ref()],
        now,
        retention: Retention::Keep,
    })
    .await
    .unwrap();
    assert_eq!(state_of(&db, kept).await, JobState::Completed);
    assert_eq!(state_of(&db, follow).await, JobState::Available);
    // With a stale token, the handler's writes roll back with the completion.
    let id = ids(&db, vec![job("txq", "4")], now).await[0];
    let c =
        db.b.job_claim(&claim("txq", 1, now, db.strategy()))
            .await
            .unwrap()
            .remove(0);
    assert_eq!(c.id, id);
    let stale = JobRef {
        id,
        token: c.lease_token.wrapping_add(1),
    };
    let mut tx = backlog_sql::JobTx::begin(db.b.as_ref()).await.unwrap();
    let ghost = tx.enqueue(vec![job("txq-out", "5")], now).await.unwrap()[0].id;
    let e = tx
        .complete(JobCompleteParams {
            jobs: vec![stale],
            now,
            retention: Retention::Keep,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::LeaseLost { job_id } if job_id == id),
        "{e}"
    );
    assert!(
        db.b.job_get(ghost).await.unwrap().is_none(),
        "the handler's write survived a lost lease"
    );
    assert_eq!(state_of(&db, id).await, JobState::Running);
}
