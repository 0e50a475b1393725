//! What a claim takes: order and priority, due times, paused queues, kinds, and the pending counts.

use super::*;

pub(crate) async fn fifo_lifo_and_priority(db: Db) {
    for strategy in db.strategies() {
        let now = db.now;
        let qn = format!("order-{}", harness::strategy_name(strategy));
        let mut jobs = vec![];
        for (i, pr) in [5i16, 0, 5, 0].into_iter().enumerate() {
            let mut j = job(&qn, &format!(r#"{{"i":{i}}}"#));
            j.priority = pr;
            j.run_at = Some(now - 10 * SEC + i as i64); // distinct due times, in input order
            jobs.push(j);
        }
        let id = ids(&db, jobs, now).await;
        let mut got = vec![];
        for _ in 0..4 {
            got.push(db.b.job_claim(&claim(&qn, 1, now, strategy)).await.unwrap()[0].id);
        }
        assert_eq!(
            got,
            vec![id[1], id[3], id[0], id[2]],
            "fifo by priority ({strategy:?})"
        );

        let lq = format!("lifo-{}", harness::strategy_name(strategy));
        let mut s = QueueSettings::defaults(q(&lq));
        s.order = Ordering::Lifo;
        db.b.queue_upsert(&s, now).await.unwrap();
        assert_eq!(
            db.b.queue_get(&q(&lq)).await.unwrap().unwrap().order,
            Ordering::Lifo
        );
        let id = ids(
            &db,
            (0..3)
                .map(|i| {
                    let mut j = job(&lq, "{}");
                    j.run_at = Some(now - 10 * SEC + i);
                    j
                })
                .collect(),
            now,
        )
        .await;
        let mut p = claim(&lq, 3, now, strategy);
        p.order = Ordering::Lifo;
        let first = db.b.job_claim(&p).await.unwrap();
        let got: Vec<i64> = first.iter().map(|c| c.id).collect();
        assert_eq!(got, vec![id[2], id[1], id[0]], "lifo ({strategy:?})");
        // The same order when the claim comes with a completion of the jobs before it.
        let later = ids(
            &db,
            (0..3)
                .map(|i| {
                    let mut j = job(&lq, "{}");
                    j.run_at = Some(now - 5 * SEC + i);
                    j
                })
                .collect(),
            now,
        )
        .await;
        let refs: Vec<JobRef> = first.iter().map(|c| c.job_ref()).collect();
        p.limit = 2;
        let r =
            db.b.job_complete_claim(JobCompleteClaimParams {
                complete: JobCompleteParams {
                    jobs: refs,
                    now,
                    retention: Retention::Delete,
                },
                claim: p,
                expect_jobs: true,
                groups: vec![],
            })
            .await
            .unwrap();
        assert_eq!(
            r.completed.len(),
            3,
            "lifo complete and claim ({strategy:?})"
        );
        let next: Vec<i64> = r.claimed.unwrap().iter().map(|c| c.id).collect();
        assert_eq!(
            next,
            vec![later[2], later[1]],
            "lifo complete and claim ({strategy:?})"
        );
    }
}

pub(crate) async fn delayed_jobs_wait_for_run_at(db: Db) {
    let now = db.now;
    let mut j = job("later", "{}");
    j.run_at = Some(now + 60 * SEC);
    let id = ids(&db, vec![j], now).await[0];
    for strategy in db.strategies() {
        assert!(
            db.b.job_claim(&claim("later", 5, now, strategy))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            db.b.job_claim(&claim("later", 5, now + 60 * SEC - 1, strategy))
                .await
                .unwrap()
                .is_empty()
        );
    }
    let stats = db.b.queue_stats(Some(&q("later")), now).await.unwrap();
    assert_eq!((stats[0].1.scheduled, stats[0].1.available), (1, 0));
    let got =
        db.b.job_claim(&claim("later", 5, now + 60 * SEC, db.strategy()))
            .await
            .unwrap();
    assert_eq!(got[0].id, id);
}

pub(crate) async fn paused_queues_hand_out_nothing(db: Db) {
    let now = db.now;
    let id = ids(&db, vec![job("p", "{}")], now).await[0];
    db.b.queue_set_paused(&q("p"), true, now).await.unwrap();
    for strategy in db.strategies() {
        assert!(
            db.b.job_claim(&claim("p", 5, now, strategy))
                .await
                .unwrap()
                .is_empty()
        );
    }
    assert!(db.b.queue_get(&q("p")).await.unwrap().unwrap().paused);
    db.b.queue_set_paused(&q("p"), false, now).await.unwrap();
    assert_eq!(
        db.b.job_claim(&claim("p", 5, now, db.strategy()))
            .await
            .unwrap()[0]
            .id,
        id
    );
}

pub(crate) async fn kinds_filter_claims(db: Db) {
    let now = db.now;
    let mut a = job("k", "{}");
    a.kind = Some(Kind::new("email").unwrap());
    let mut b = job("k", "{}");
    b.kind = Some(Kind::new("sms").unwrap());
    let id = ids(&db, vec![a, b, job("k", "{}")], now).await;
    for strategy in db.strategies() {
        let mut p = claim("k", 10, now, strategy);
        p.kinds = vec![Kind::new("sms").unwrap(), Kind::new("fax").unwrap()];
        let got = db.b.job_claim(&p).await.unwrap();
        if !got.is_empty() {
            assert_eq!(got.len(), 1);
            assert_eq!((got[0].id, got[0].kind.as_deref()), (id[1], Some("sms")));
            db.b.job_release(JobReleaseParams {
                job: got[0].job_ref(),
                now,
                run_at: now,
            })
            .await
            .unwrap();
        } else {
            panic!("kind filter found nothing ({strategy:?})");
        }
    }
    let all =
        db.b.job_claim(&claim("k", 10, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(all.len(), 3);
}

pub(crate) async fn pending_counts_by_kind_and_due_time(db: Db) {
    let now = db.now;
    let kind = |k: &str| Kind::new(k).unwrap();
    let of = |k: Option<&str>, run_at: i64| {
        let mut j = job("pk", "{}");
        j.kind = k.map(kind);
        j.run_at = Some(run_at);
        j
    };
    let later = now + 100 * SEC;
    ids(
        &db,
        vec![
            of(Some("a"), now),
            of(Some("b"), now),
            of(Some("b"), later),
            of(None, now),
            of(Some("c"), now),
        ],
        now,
    )
    .await;
    // The "c" job runs; the others wait.
    let mut p = claim("pk", 1, now, db.strategy());
    p.kinds = vec![kind("c")];
    assert_eq!(db.b.job_claim(&p).await.unwrap().len(), 1);
    let count = |queues: &[&str], kinds: &[&str], due_by: Option<i64>| {
        let params = JobCountPendingParams {
            queues: queues.iter().map(|n| q(n)).collect(),
            kinds: kinds.iter().map(|k| kind(k)).collect(),
            due_by,
        };
        let b = db.b.clone();
        async move { b.job_count_pending(&params).await.unwrap() }
    };
    assert_eq!(count(&["pk"], &[], None).await, 5);
    assert_eq!(count(&["pk"], &[], Some(now)).await, 4, "not yet due");
    // A worker of kind "a" has one job left although four others wait in its queue.
    assert_eq!(count(&["pk"], &["a"], None).await, 1);
    assert_eq!(count(&["pk"], &["b"], None).await, 2);
    assert_eq!(count(&["pk"], &["b"], Some(now)).await, 1);
    assert_eq!(
        count(&["pk"], &["a", "b", "c"], None).await,
        4,
        "running counts"
    );
    assert_eq!(count(&["pk"], &["zzz"], None).await, 0);
    assert_eq!(count(&["other"], &["a"], None).await, 0);
    assert_eq!(count(&[], &[], None).await, 0);
}
