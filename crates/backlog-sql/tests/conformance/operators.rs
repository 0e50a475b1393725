//! What operators do and see: retry, cancel, hold and redrive, stats and lists, settings, history and the audit log, the oldest open transaction.

use super::*;

pub(crate) async fn operator_actions(db: Db) {
    let now = db.now;
    let id = ids(
        &db,
        vec![job("ad", "1"), job("ad", "2"), job("ad", "3")],
        now,
    )
    .await;
    // hold / release (seed S3's "pending review")
    assert_eq!(
        db.b.job_admin(id[0], AdminAction::Hold, now)
            .await
            .unwrap()
            .state,
        JobState::Held
    );
    let c =
        db.b.job_claim(&claim("ad", 10, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(c.len(), 2, "held job was claimed");
    assert_eq!(
        db.b.job_admin(id[0], AdminAction::Release, now)
            .await
            .unwrap()
            .state,
        JobState::Available
    );
    // cancel an available job; a running one is refused
    assert_eq!(
        db.b.job_admin(id[0], AdminAction::Cancel, now)
            .await
            .unwrap()
            .state,
        JobState::Cancelled
    );
    let e =
        db.b.job_admin(id[1], AdminAction::Cancel, now)
            .await
            .unwrap_err();
    assert!(
        matches!(
            e,
            Error::JobStateConflict {
                state: JobState::Running,
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        db.b.job_admin(999_999_999, AdminAction::Cancel, now).await,
        Err(Error::JobNotFound { .. })
    ));
    // retry a cancelled job: attempts reset
    let r =
        db.b.job_admin(id[0], AdminAction::Retry, now + 1)
            .await
            .unwrap();
    assert_eq!(
        (r.state, r.attempt, r.run_at, r.finished_at),
        (JobState::Available, 0, now + 1, None)
    );
    // dead jobs, then redrive
    for c in &c {
        db.b.job_fail(JobFailParams {
            job: c.job_ref(),
            now,
            error: "no".into(),
            cancelled: false,
            retry_at: None,
        })
        .await
        .unwrap();
    }
    let dead =
        db.b.job_list(JobListParams {
            queue: Some(q("ad")),
            state: Some(StateFilter::Stored(JobState::Dead)),
            kind: None,
            unique_key: None,
            after_id: 0,
            limit: 10,
            now,
        })
        .await
        .unwrap();
    assert_eq!(dead.len(), 2);
    assert!(matches!(
        db.b.job_admin(id[1], AdminAction::Hold, now).await,
        Err(Error::JobStateConflict { .. })
    ));
    assert_eq!(
        db.b.job_admin(id[1], AdminAction::Retry, now)
            .await
            .unwrap()
            .state,
        JobState::Available
    );
    assert_eq!(
        db.b.queue_redrive(QueueRedriveParams {
            queue: q("ad"),
            limit: 10,
            now
        })
        .await
        .unwrap(),
        1
    );
    assert_eq!(state_of(&db, id[2]).await, JobState::Available);
    assert_eq!(pending(&db, &["ad", "none"]).await, 3);
}

pub(crate) async fn redrive_skips_taken_unique_keys(db: Db) {
    let now = db.now;
    let a = enqueue(&db, vec![keyed("rk", "k")], now).await[0].id;
    let c =
        db.b.job_claim(&claim("rk", 1, now, db.strategy()))
            .await
            .unwrap()[0]
            .job_ref();
    db.b.job_fail(JobFailParams {
        job: c,
        now,
        error: "x".into(),
        cancelled: false,
        retry_at: None,
    })
    .await
    .unwrap();
    let b = enqueue(&db, vec![keyed("rk", "k"), job("rk", "{}")], now).await;
    assert!(b[0].created && b[0].id != a);
    let d =
        db.b.job_claim(&claim("rk", 2, now, db.strategy()))
            .await
            .unwrap();
    let plain = d.iter().find(|x| x.id == b[1].id).unwrap().job_ref();
    db.b.job_fail(JobFailParams {
        job: plain,
        now,
        error: "x".into(),
        cancelled: false,
        retry_at: None,
    })
    .await
    .unwrap();
    // Job a's key is held by b: a stays dead, the other dead job comes back.
    assert_eq!(
        db.b.queue_redrive(QueueRedriveParams {
            queue: q("rk"),
            limit: 10,
            now
        })
        .await
        .unwrap(),
        1
    );
    assert_eq!(state_of(&db, a).await, JobState::Dead);
    assert_eq!(state_of(&db, b[1].id).await, JobState::Available);
}

pub(crate) async fn stats_and_lists(db: Db) {
    let now = db.now;
    let mut later = job("st", "{}");
    later.run_at = Some(now + 100 * SEC);
    let id = ids(
        &db,
        vec![
            job("st", "{}"),
            job("st", "{}"),
            later,
            job("st", "{}"),
            job("st", "{}"),
        ],
        now,
    )
    .await;
    db.b.job_admin(id[3], AdminAction::Hold, now).await.unwrap();
    let c =
        db.b.job_claim(&claim("st", 2, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(c.len(), 2);
    complete(&db, vec![c[0].job_ref()], now, Retention::Keep).await;
    // A failed attempt due to run again later is retrying, not scheduled.
    db.b.job_fail(JobFailParams {
        job: c[1].job_ref(),
        now,
        error: "x".into(),
        cancelled: false,
        retry_at: Some(now + 50 * SEC),
    })
    .await
    .unwrap();
    db.b.queue_ensure(&q("empty"), now).await.unwrap();
    let all = db.b.queue_stats(None, now).await.unwrap();
    let st = &all.iter().find(|(n, _)| n == "st").unwrap().1;
    assert_eq!(
        *st,
        QueueStats {
            available: 1,
            scheduled: 1,
            retrying: 1,
            running: 0,
            completed: 1,
            dead: 0,
            cancelled: 0,
            held: 1,
            waiting: 0,
            archived: 0,
        }
    );
    assert!(
        all.iter()
            .any(|(n, s)| n == "empty" && *s == QueueStats::default())
    );
    // Jobs the archive retention (or an archiving prune) moved out are counted as archived,
    // whatever state they finished in, and no longer under that state.
    let sa = ids(&db, (0..4).map(|_| job("sa", "{}")).collect(), now).await;
    let c =
        db.b.job_claim(&claim("sa", 4, now, db.strategy()))
            .await
            .unwrap();
    let by_id = |i: i64| c.iter().find(|x| x.id == i).unwrap().job_ref();
    complete(
        &db,
        vec![by_id(sa[0]), by_id(sa[1])],
        now,
        Retention::Archive,
    )
    .await;
    complete(&db, vec![by_id(sa[2])], now, Retention::Keep).await;
    db.b.job_fail(JobFailParams {
        job: by_id(sa[3]),
        now,
        error: "no".into(),
        retry_at: None,
        cancelled: false,
    })
    .await
    .unwrap();
    let pruned =
        db.b.job_prune(JobPruneParams {
            queue: q("sa"),
            state: JobState::Dead,
            finished_before: now + 1,
            limit: 10,
            archive: true,
        })
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    let archived = QueueStats {
        completed: 1,
        archived: 3,
        ..QueueStats::default()
    };
    let one = db.b.queue_stats(Some(&q("sa")), now).await.unwrap();
    assert_eq!(one, vec![("sa".to_string(), archived.clone())]);
    let all = db.b.queue_stats(None, now).await.unwrap();
    assert_eq!(all.iter().find(|(n, _)| n == "sa").unwrap().1, archived);
    assert_eq!(
        all.iter().find(|(n, _)| n == "st").unwrap().1.archived,
        0,
        "another queue's archive is not counted"
    );
    let list = |state: Option<StateFilter>| {
        let b = db.b.clone();
        async move {
            b.job_list(JobListParams {
                queue: Some(q("st")),
                state,
                kind: None,
                unique_key: None,
                after_id: 0,
                limit: 100,
                now,
            })
            .await
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(None).await, id);
    assert_eq!(list(Some(StateFilter::Scheduled)).await, vec![id[2]]);
    assert_eq!(list(Some(StateFilter::Retrying)).await, vec![id[1]]);
    assert_eq!(
        list(Some(StateFilter::Stored(JobState::Available))).await,
        vec![id[4]]
    );
    assert_eq!(
        list(Some(StateFilter::Stored(JobState::Held))).await,
        vec![id[3]]
    );
    let page =
        db.b.job_list(JobListParams {
            queue: None,
            state: None,
            kind: None,
            unique_key: None,
            after_id: id[1],
            limit: 1,
            now,
        })
        .await
        .unwrap();
    assert_eq!(page[0].id, id[2]);
    // A kind filter, alone and with a state.
    let mut a = job("kl", "{}");
    a.kind = Some(Kind::new("ka").unwrap());
    let mut b = job("kl", "{}");
    b.kind = Some(Kind::new("kb").unwrap());
    let kl = ids(&db, vec![a.clone(), b, a], now).await;
    for state in [None, Some(StateFilter::Stored(JobState::Available))] {
        let of_kind: Vec<i64> =
            db.b.job_list(JobListParams {
                queue: Some(q("kl")),
                state,
                kind: Some(Kind::new("ka").unwrap()),
                unique_key: None,
                after_id: 0,
                limit: 10,
                now,
            })
            .await
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(of_kind, vec![kl[0], kl[2]]);
    }
    // By unique key, across queues.
    let keyed_ids = ids(&db, vec![keyed("ku1", "k-1"), keyed("ku2", "k-2")], now).await;
    let by_key: Vec<i64> =
        db.b.job_list(JobListParams {
            queue: None,
            state: None,
            kind: None,
            unique_key: Some("k-2".into()),
            after_id: 0,
            limit: 10,
            now,
        })
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(by_key, vec![keyed_ids[1]]);
    let queues = db.b.queue_list().await.unwrap();
    let stq = queues
        .iter()
        .find(|i| i.settings.name.as_str() == "st")
        .expect("queue with jobs is listed");
    assert_eq!(stq.pending, 4, "available, scheduled, retrying and held");
    assert!(queues.iter().any(|i| i.settings.name.as_str() == "empty"));
}

pub(crate) async fn schema_version_and_oldest_due(db: Db) {
    let now = db.now;
    assert_eq!(
        db.b.schema_version().await.unwrap(),
        backlog_sql::SCHEMA_VERSION
    );
    ids(&db, vec![job("lag_a", "{}")], now - 5 * SEC).await;
    let mut later = job("lag_a", "{}");
    later.run_at = Some(now - 2 * SEC);
    let mut future = job("lag_b", "{}");
    future.run_at = Some(now + 60 * SEC);
    ids(&db, vec![later, future], now - 5 * SEC).await;
    let running = ids(&db, vec![job("lag_c", "{}")], now - 9 * SEC).await;
    db.b.job_claim(&claim("lag_c", 1, now, db.strategy()))
        .await
        .unwrap();
    assert_eq!(running.len(), 1);
    // The oldest is found whatever priority and shard it lies on (the index is probed per
    // shard and priority, not read whole): here at priority 5, behind a due job of 0 and a
    // later one of -3.
    let mut settings = QueueSettings::defaults(q("lag_d"));
    settings.shards = 4;
    db.b.queue_upsert(&settings, now).await.unwrap();
    let at = |priority: i16, run_at: i64| {
        let mut j = job("lag_d", "{}");
        j.priority = priority;
        j.run_at = Some(run_at);
        j
    };
    #[rustfmt::skip]
    let lag_d = vec![
        at(-3, now + 30 * SEC), at(0, now - 3 * SEC), at(5, now - 7 * SEC), at(5, now - SEC),
        at(5, now - 2 * SEC), at(9, now - 4 * SEC),
    ];
    ids(&db, lag_d, now - 8 * SEC).await;
    let mut oldest = db.b.queue_oldest_due(now).await.unwrap();
    oldest.sort();
    // lag_b's only job is not due and lag_c's is running: neither is behind.
    assert_eq!(
        oldest,
        vec![
            ("lag_a".to_owned(), now - 5 * SEC),
            ("lag_d".to_owned(), now - 7 * SEC)
        ]
    );
}

pub(crate) async fn stats_history_and_audit(db: Db) {
    let m1 = minute_of(db.now);
    let m2 = m1 + 60 * SEC;
    let row = |queue: &str, minute, f: &dyn Fn(&mut StatCounts)| {
        let mut counts = StatCounts::default();
        f(&mut counts);
        StatRow {
            queue: queue.into(),
            minute,
            counts,
            depth: None,
        }
    };
    db.b.stat_add(&[
        row("s1", m1, &|c| {
            c.enqueued = 3;
            c.record_wait(500);
        }),
        row("s1", m2, &|c| c.completed = 4),
    ])
    .await
    .unwrap();
    // Another process adds to the same minute.
    db.b.stat_add(&[
        row("s1", m1, &|c| c.enqueued = 2),
        row("s2", m2, &|c| {
            c.failed = 1;
            c.dead = 1;
            c.record_wait(120 * SEC);
        }),
    ])
    .await
    .unwrap();
    let depth = StatDepth {
        available: 1,
        scheduled: 2,
        running: 3,
        dead: 4,
    };
    db.b.stat_snapshot(m2, &[("s1".into(), depth)])
        .await
        .unwrap();

    let all = db.b.stat_history(None, m1).await.unwrap();
    let keys: Vec<(&str, i64)> = all.iter().map(|r| (r.queue.as_str(), r.minute)).collect();
    assert_eq!(keys, vec![("s1", m1), ("s1", m2), ("s2", m2)]);
    assert_eq!(all[0].counts.enqueued, 5);
    assert_eq!((all[0].counts.wait[0], all[0].counts.wait_sum_us), (1, 500));
    assert_eq!(all[0].depth, None);
    assert_eq!((all[1].counts.completed, all[1].depth), (4, Some(depth)));
    assert_eq!(all[2].counts.wait[6], 1, "over 60 s");
    let s2 = db.b.stat_history(Some(&q("s2")), m1).await.unwrap();
    assert_eq!((s2.len(), s2[0].counts.dead), (1, 1));
    assert_eq!(db.b.stat_history(None, m2).await.unwrap().len(), 2);

    let totals = |t: Vec<StatRow>| -> Vec<(String, i64, i64, i64)> {
        t.into_iter()
            .map(|r| {
                (
                    r.queue,
                    r.counts.enqueued,
                    r.counts.completed,
                    r.counts.failed,
                )
            })
            .collect()
    };
    let before = totals(db.b.stat_totals().await.unwrap());
    assert_eq!(before, vec![("s1".into(), 5, 4, 0), ("s2".into(), 0, 0, 1)]);
    // Pruning folds old minutes into minute 0: history loses them, totals do not change.
    assert_eq!(db.b.stat_prune(m2).await.unwrap(), 1);
    assert_eq!(totals(db.b.stat_totals().await.unwrap()), before);
    assert_eq!(db.b.stat_history(None, 1).await.unwrap().len(), 2);
    assert_eq!(db.b.stat_prune(m2).await.unwrap(), 0);
    assert_eq!(totals(db.b.stat_totals().await.unwrap()), before);

    // The audit log, newest first, paged and filtered by queue.
    let mut ids = vec![];
    for (i, (action, queue)) in [
        ("queue.pause", "a1"),
        ("job.retry", "a2"),
        ("queue.settings", "a1"),
    ]
    .into_iter()
    .enumerate()
    {
        let e = AuditEntry {
            id: 0,
            at: db.now + i as i64,
            actor: if i == 1 { "cli:ann" } else { "ops" }.into(),
            action: action.into(),
            queue: Some(queue.into()),
            job_id: (action == "job.retry").then_some(42),
            detail: format!(r#"{{"n": {i}}}"#),
        };
        ids.push(db.b.audit_add(&e).await.unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let list = |before_id, queue: Option<&str>, limit| AuditListParams {
        before_id,
        queue: queue.map(q),
        limit,
        ..AuditListParams::newest(limit)
    };
    let newest = db.b.audit_list(&list(i64::MAX, None, 2)).await.unwrap();
    assert_eq!(
        newest.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        vec!["queue.settings", "job.retry"]
    );
    assert_eq!(newest[1].job_id, Some(42));
    let detail: serde_json::Value = serde_json::from_str(&newest[0].detail).unwrap();
    assert_eq!(detail, serde_json::json!({"n": 2}));
    let older =
        db.b.audit_list(&list(newest[1].id, None, 10))
            .await
            .unwrap();
    assert_eq!((older.len(), older[0].id), (1, ids[0]));
    let a1 =
        db.b.audit_list(&list(i64::MAX, Some("a1"), 10))
            .await
            .unwrap();
    assert_eq!(a1.len(), 2);
    assert!(
        a1.iter()
            .all(|e| e.queue.as_deref() == Some("a1") && e.actor == "ops")
    );
    // By actor, by action, and both with a queue: each filter narrows the others.
    let by = |actor: Option<&str>, action: Option<&str>, queue: Option<&str>| AuditListParams {
        actor: actor.map(str::to_owned),
        action: action.map(str::to_owned),
        queue: queue.map(q),
        ..AuditListParams::newest(10)
    };
    let ids_of = |entries: Vec<AuditEntry>| entries.iter().map(|e| e.id).collect::<Vec<_>>();
    let ann =
        db.b.audit_list(&by(Some("cli:ann"), None, None))
            .await
            .unwrap();
    assert_eq!(ids_of(ann), vec![ids[1]]);
    let ops = db.b.audit_list(&by(Some("ops"), None, None)).await.unwrap();
    assert_eq!(ids_of(ops), vec![ids[2], ids[0]]);
    let pauses =
        db.b.audit_list(&by(None, Some("queue.pause"), None))
            .await
            .unwrap();
    assert_eq!(ids_of(pauses), vec![ids[0]]);
    let none = by(Some("cli:ann"), Some("queue.pause"), None);
    assert!(db.b.audit_list(&none).await.unwrap().is_empty());
    let none = by(None, Some("queue.settings"), Some("a2"));
    assert!(db.b.audit_list(&none).await.unwrap().is_empty());
}

/// A session idle in a transaction is seen, with its age: it keeps completed jobs' rows from
/// being reclaimed. Other tests' sessions may be older; the one reported is never younger.
pub(crate) async fn oldest_open_transaction(db: Db) {
    use sqlx::Connection as _;
    match db.engine {
        harness::Engine::Sqlite | harness::Engine::Memory => {
            assert_eq!(db.b.db_oldest_transaction().await.unwrap(), None);
        }
        harness::Engine::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
            sqlx::raw_sql("BEGIN; SELECT txid_current();")
                .execute(&mut c)
                .await
                .unwrap();
            let ours: f64 = sqlx::query_scalar(
                "SELECT EXTRACT(EPOCH FROM (clock_timestamp() - xact_start))::float8 \
                 FROM pg_stat_activity WHERE pid = pg_backend_pid()",
            )
            .fetch_one(&mut c)
            .await
            .unwrap();
            let t =
                db.b.db_oldest_transaction()
                    .await
                    .unwrap()
                    .expect("ours is open");
            assert!(
                t.age.as_secs_f64() >= ours,
                "{t:?} younger than ours ({ours} s)"
            );
            c.close().await.unwrap();
        }
        harness::Engine::MySql => {
            let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            sqlx::raw_sql("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                .execute(&mut c)
                .await
                .unwrap();
            let t =
                db.b.db_oldest_transaction()
                    .await
                    .unwrap()
                    .expect("ours is open");
            assert!(t.pid > 0, "{t:?}");
            c.close().await.unwrap();
        }
    }
}

pub(crate) async fn queue_settings_round_trip(db: Db) {
    let now = db.now;
    assert!(db.b.queue_get(&q("cfg")).await.unwrap().is_none());
    let s = QueueSettings {
        name: q("cfg"),
        paused: false,
        max_attempts: 7,
        backoff_base: Duration::from_millis(250),
        backoff_max: Duration::from_secs(90),
        lease: Duration::from_secs(45),
        order: Ordering::Lifo,
        retention: Retention::Archive,
        concurrency: Some(3),
        global_concurrency: Some(12),
        group_concurrency: 2,
        group_on_failure: GroupFailure::Next,
        rate_limit: Some(RateLimit {
            starts: 100,
            period: Duration::from_secs(60),
        }),
        group_rate_limit: Some(RateLimit {
            starts: 3,
            period: Duration::from_millis(1500),
        }),
        shards: 16,
    };
    db.b.queue_upsert(&s, now).await.unwrap();
    assert_eq!(db.b.queue_get(&q("cfg")).await.unwrap().unwrap(), s);
    db.b.queue_ensure(&q("cfg"), now).await.unwrap(); // does not reset
    assert_eq!(db.b.queue_get(&q("cfg")).await.unwrap().unwrap(), s);
}

/// Run-now: a scheduled job, or one waiting to retry, becomes due at once with its attempts
/// kept; a job in another state is refused and unchanged; the head of an ordered group that
/// waits to retry stays its group's head.
pub(crate) async fn run_now_makes_a_job_due(db: Db) {
    let now = db.now;
    let mut later = job("rn", "1");
    later.run_at = Some(now + 3600 * SEC);
    let id = ids(&db, vec![later], now).await[0];
    let c =
        db.b.job_claim(&claim("rn", 10, now, db.strategy()))
            .await
            .unwrap();
    assert!(c.is_empty(), "a scheduled job was claimed");
    let j =
        db.b.job_admin(id, AdminAction::RunNow, now + 1)
            .await
            .unwrap();
    assert_eq!(
        (j.state, j.run_at, j.attempt),
        (JobState::Available, now + 1, 0)
    );
    let c =
        db.b.job_claim(&claim("rn", 10, now + 2, db.strategy()))
            .await
            .unwrap();
    assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), vec![id]);
    // Running: refused, and nothing changes.
    let refused = db.b.job_admin(id, AdminAction::RunNow, now + 3).await;
    assert!(
        matches!(
            refused,
            Err(Error::JobStateConflict {
                state: JobState::Running,
                reported: "running",
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        db.b.job_get(id).await.unwrap().unwrap().state,
        JobState::Running
    );

    // An ordered group's head that failed and waits to retry blocks its group; run now, it is
    // due at once and stays the head (available), the job behind it still waiting.
    let grouped = |p: &str| {
        let mut j = job("rg", p);
        j.group = Some(backlog_core::GroupKey::new("g").unwrap());
        j
    };
    let g = ids(&db, vec![grouped("1"), grouped("2")], now).await;
    let c =
        db.b.job_claim(&claim("rg", 10, now, db.strategy()))
            .await
            .unwrap();
    assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), vec![g[0]]);
    db.b.job_fail(JobFailParams {
        job: c[0].job_ref(),
        now,
        error: "later".into(),
        cancelled: false,
        retry_at: Some(now + 3600 * SEC),
    })
    .await
    .unwrap();
    let head = db.b.job_get(g[0]).await.unwrap().unwrap();
    assert_eq!(head.reported_state(now), "retrying");
    let j =
        db.b.job_admin(g[0], AdminAction::RunNow, now + 1)
            .await
            .unwrap();
    assert_eq!(
        (j.state, j.run_at, j.attempt),
        (JobState::Available, now + 1, 1)
    );
    let behind = db.b.job_get(g[1]).await.unwrap().unwrap();
    assert_eq!(
        behind.state,
        JobState::Waiting,
        "the job behind the head still waits"
    );
    let c =
        db.b.job_claim(&claim("rg", 10, now + 2, db.strategy()))
            .await
            .unwrap();
    assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), vec![g[0]]);
}

/// An operator's delete: a job in any state but running, from wherever it is kept (the job
/// table, the completed jobs kept apart, the archive), answered as it was; its unique key free
/// at once; the counts follow.
pub(crate) async fn delete_takes_a_job_from_wherever_it_is_kept(db: Db) {
    let now = db.now;
    let mut later = job("dl", "2");
    later.run_at = Some(now + 3600 * SEC);
    let live = ids(&db, vec![job("dl", "1"), later, keyed("dl", "k")], now).await;
    let mut finished = Vec::new();
    for (queue, retention) in [("dk", Retention::Keep), ("da", Retention::Archive)] {
        let id = ids(&db, vec![job(queue, "1")], now).await[0];
        let c =
            db.b.job_claim(&claim(queue, 1, now, db.strategy()))
                .await
                .unwrap();
        complete(&db, vec![c[0].job_ref()], now, retention).await;
        finished.push(id);
    }
    let archived = db.b.job_get(finished[1]).await.unwrap().unwrap();
    assert!(
        archived.archived,
        "the archived job is read from the archive"
    );
    let running = ids(&db, vec![job("dr", "1")], now).await[0];
    db.b.job_claim(&claim("dr", 1, now, db.strategy()))
        .await
        .unwrap();

    for &id in live.iter().chain(&finished) {
        let before = db.b.job_get(id).await.unwrap().unwrap();
        let gone = db.b.job_delete(id, now).await.unwrap();
        assert_eq!((gone.id, gone.state), (id, before.state));
        assert!(
            db.b.job_get(id).await.unwrap().is_none(),
            "job {id} is still there"
        );
        let again = db.b.job_delete(id, now).await;
        assert!(
            matches!(again, Err(Error::JobNotFound { job_id }) if job_id == id),
            "{again:?}"
        );
    }
    // The unique key is free: the same key makes a new job.
    let out = enqueue(&db, vec![keyed("dl", "k")], now).await;
    assert!(out[0].created, "the deleted job's unique key still holds");
    // A running job is refused and stays.
    let refused = db.b.job_delete(running, now).await;
    assert!(
        matches!(
            refused,
            Err(Error::JobStateConflict {
                state: JobState::Running,
                action: "delete",
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(state_of(&db, running).await, JobState::Running);
    assert!(matches!(
        db.b.job_delete(999_999_999, now).await,
        Err(Error::JobNotFound { .. })
    ));
    super::counts::assert_counts_match(&db, "after deletes").await;
    let stats =
        db.b.queue_stats(Some(&q("da")), now_micros())
            .await
            .unwrap();
    assert_eq!(stats[0].1.archived, 0, "the archived job is still counted");
}

/// Workers' registrations: written at start and at each beat (the id, host, pid, version and
/// start stay as first written), listed longest running first, deleted when a worker stops, and
/// pruned once expired before a time.
pub(crate) async fn worker_registrations(db: Db) {
    let reg = |id: &str, started_at: i64| WorkerRegistration {
        id: id.into(),
        host: "box-1".into(),
        pid: 4242,
        version: "0.1.0".into(),
        queues: r#"[{"queue": "emails", "concurrency": 10}]"#.into(),
        running: 0,
        started_at,
        seen_at: started_at,
        expires_at: started_at + 30 * SEC,
    };
    assert!(db.b.worker_list().await.unwrap().is_empty());
    let (a, b) = (
        reg("box-1:4242:aa", db.now),
        reg("box-1:4243:bb", db.now + SEC),
    );
    db.b.worker_beat(&b).await.unwrap();
    db.b.worker_beat(&a).await.unwrap();
    // A beat: what it runs and when it was seen change; where and since when do not.
    let beat = WorkerRegistration {
        host: "elsewhere".into(),
        started_at: db.now + 99 * SEC,
        queues: r#"[{"queue": "emails", "concurrency": 20}]"#.into(),
        running: 7,
        seen_at: db.now + 5 * SEC,
        expires_at: db.now + 35 * SEC,
        ..a.clone()
    };
    db.b.worker_beat(&beat).await.unwrap();
    let list = db.b.worker_list().await.unwrap();
    assert_eq!(
        list.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        ["box-1:4242:aa", "box-1:4243:bb"],
        "longest running first"
    );
    let got = &list[0];
    assert_eq!(
        (got.host.as_str(), got.pid, got.started_at, got.running),
        ("box-1", 4242, db.now, 7)
    );
    assert_eq!(
        (got.seen_at, got.expires_at),
        (db.now + 5 * SEC, db.now + 35 * SEC)
    );
    let queues: serde_json::Value = serde_json::from_str(&got.queues).unwrap();
    assert_eq!(
        queues,
        serde_json::json!([{"queue": "emails", "concurrency": 20}])
    );
    // b expired at now + 31 s: pruning before then keeps it, after removes it alone.
    assert_eq!(db.b.worker_prune(db.now + 31 * SEC).await.unwrap(), 0);
    assert_eq!(db.b.worker_prune(db.now + 32 * SEC).await.unwrap(), 1);
    // A worker that stops deletes its row; deleting again changes nothing.
    db.b.worker_gone("box-1:4242:aa").await.unwrap();
    db.b.worker_gone("box-1:4242:aa").await.unwrap();
    assert!(db.b.worker_list().await.unwrap().is_empty());
}
