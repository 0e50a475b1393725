//! Many claimers at once: never a job twice, none lost, over shards and over processes, and complete-and-claim loops.

use super::*;

pub(crate) async fn concurrent_claimers_never_share_a_job(db: Db) {
    for strategy in db.strategies() {
        let qn = format!("many-{}", harness::strategy_name(strategy));
        let n = 10_000usize;
        let jobs: Vec<NewJob> = (0..n).map(|_| job(&qn, "{}")).collect();
        enqueue(&db, jobs, db.now).await;
        let all = claim_all_at_once(&db, &qn, strategy, 25).await;
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            all.len(),
            "a job was handed to two claimers ({strategy:?})"
        );
        assert_eq!(all.len(), n, "jobs were lost ({strategy:?})");
    }
}

/// 16 claimers of `qn` at once, each claiming up to `limit` at a time and completing what it
/// took, until each finds nothing three times running; the ids of every claim, repeats kept.
pub(crate) async fn claim_all_at_once(
    db: &Db,
    qn: &str,
    strategy: ClaimStrategy,
    limit: u32,
) -> Vec<i64> {
    let mut handles = vec![];
    for w in 0..16 {
        let b = db.b.clone();
        let qn = qn.to_owned();
        let now = db.now;
        handles.push(tokio::spawn(async move {
            let mut mine = vec![];
            let mut empty = 0;
            while empty < 3 {
                let mut p = claim(&qn, limit, now, strategy);
                p.owner = format!("w{w}");
                let got = b.job_claim(&p).await.unwrap();
                if got.is_empty() {
                    empty += 1;
                    tokio::task::yield_now().await;
                    continue;
                }
                empty = 0;
                let refs: Vec<JobRef> = got.iter().map(|c| c.job_ref()).collect();
                let done = (b.job_complete(JobCompleteParams {
                    jobs: refs.clone(),
                    now,
                    retention: Retention::Delete,
                }))
                .await
                .unwrap();
                assert_eq!(
                    done.len(),
                    refs.len(),
                    "a claimed job could not be completed"
                );
                mine.extend(got.iter().map(|c| c.id));
            }
            mine
        }));
    }
    let mut all = vec![];
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all
}

/// A queue spread over 8 shards: single and batched enqueues land on the shards (where claims
/// are sharded), and 16 concurrent claimers, each starting at a random shard, take every job
/// exactly once and leave none behind.
pub(crate) async fn sharded_claims_take_every_job_once(db: Db) {
    for strategy in db.strategies() {
        let qn = format!("sharded-{}", harness::strategy_name(strategy));
        let settings = QueueSettings {
            shards: 8,
            ..QueueSettings::defaults(q(&qn))
        };
        db.b.queue_upsert(&settings, db.now).await.unwrap();
        let mut want: HashSet<i64> = HashSet::new();
        for _ in 0..40 {
            want.extend(ids(&db, vec![job(&qn, "{}")], db.now).await);
        }
        let batch: Vec<NewJob> = (0..1960).map(|_| job(&qn, "{}")).collect();
        want.extend(ids(&db, batch, db.now).await);
        if let Some(counts) = db.shard_counts(&qn).await {
            assert_eq!(counts.len(), 8, "2,000 jobs on every shard: {counts:?}");
            assert!(counts.keys().all(|s| (0..8).contains(s)), "{counts:?}");
            assert!(
                counts.values().all(|&n| n > 150),
                "roughly even: {counts:?}"
            );
        }
        let all = claim_all_at_once(&db, &qn, strategy, 7).await;
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            all.len(),
            "a job went to two claimers ({strategy:?})"
        );
        assert_eq!(distinct, want, "every job, once ({strategy:?})");
        // An empty claim means the whole queue is empty: no shard was left unvisited.
        assert!(
            db.b.job_claim(&claim(&qn, 7, db.now, strategy))
                .await
                .unwrap()
                .is_empty()
        );
    }
}

/// A queue's shards lowered while it holds jobs: the available jobs move at once to the shards
/// left, in one strict order again, and jobs that were running on a dropped shard move when the
/// leader's sweep finds them available again. No job is stranded where no claim looks.
pub(crate) async fn lowering_a_queues_shards_strands_no_job(db: Db) {
    let now = db.now;
    let qn = "reshard";
    let mut settings = QueueSettings {
        shards: 8,
        ..QueueSettings::defaults(q(qn))
    };
    db.b.queue_upsert(&settings, now).await.unwrap();
    let all = ids(&db, (0..100).map(|_| job(qn, "{}")).collect(), now).await;
    let strategy = db.strategies()[0];
    let running = db.b.job_claim(&claim(qn, 30, now, strategy)).await.unwrap();
    assert_eq!(running.len(), 30);
    settings.shards = 1;
    db.b.queue_upsert(&settings, now).await.unwrap();
    if let Some(counts) = db.shard_counts(qn).await {
        assert_eq!(
            counts.keys().copied().collect::<Vec<_>>(),
            vec![0],
            "{counts:?}"
        );
    }
    // One head again: the rest come in enqueue order.
    let rest =
        db.b.job_claim(&claim(qn, 100, now, strategy))
            .await
            .unwrap();
    let running_ids: HashSet<i64> = running.iter().map(|c| c.id).collect();
    let want: Vec<i64> = all
        .iter()
        .copied()
        .filter(|id| !running_ids.contains(id))
        .collect();
    assert_eq!(rest.iter().map(|c| c.id).collect::<Vec<_>>(), want);
    // The 30 come back to be retried, still on their old shards until a sweep moves them.
    for c in &running {
        (db.b.job_fail(JobFailParams {
            job: c.job_ref(),
            now,
            error: "again".into(),
            cancelled: false,
            retry_at: Some(now),
        }))
        .await
        .unwrap();
    }
    db.b.group_sweep(now).await.unwrap();
    let again =
        db.b.job_claim(&claim(qn, 100, now, strategy))
            .await
            .unwrap();
    let mut got: Vec<i64> = again.iter().map(|c| c.id).collect();
    got.sort_unstable();
    let mut want: Vec<i64> = running_ids.into_iter().collect();
    want.sort_unstable();
    assert_eq!(got, want);
}

/// A queue's shards raised by another process after this one last read the count (it claimed
/// from the queue's one head before): this process's next claims still take every job, wherever
/// the other process put it, before they come back short.
pub(crate) async fn shards_raised_elsewhere_are_claimed_at_once(db: Db) {
    let now = db.now;
    let qn = "raised";
    let strategy = db.strategies()[0];
    db.b.queue_upsert(&QueueSettings::defaults(q(qn)), now)
        .await
        .unwrap();
    ids(&db, vec![job(qn, "{}")], now).await;
    assert_eq!(
        db.b.job_claim(&claim(qn, 10, now, strategy))
            .await
            .unwrap()
            .len(),
        1
    );
    let other = db.connect_again().await;
    let settings = QueueSettings {
        shards: 8,
        ..QueueSettings::defaults(q(qn))
    };
    other.queue_upsert(&settings, now).await.unwrap();
    let batch: Vec<NewJob> = (0..200).map(|_| job(qn, "{}")).collect();
    let want: HashSet<i64> = (other.job_insert(JobInsertParams { jobs: batch, now }).await)
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    other.close().await;
    if let Some(counts) = db.shard_counts(qn).await {
        assert!(counts.len() > 1, "spread over the shards: {counts:?}");
    }
    let mut got = HashSet::new();
    loop {
        let claimed = db.b.job_claim(&claim(qn, 30, now, strategy)).await.unwrap();
        let short = claimed.len() < 30;
        got.extend(claimed.iter().map(|c| c.id));
        if short {
            break;
        }
    }
    assert_eq!(got, want, "every job before the first short claim");
}

/// Claimers of four processes (each its own connection pool, as `connect_again` opens it; on
/// Galera each on another node, where row locks do not reach and two nodes' claims of one job
/// meet only at commit): no job reaches two of them, none is lost, and every claimed job's
/// completion counts.
pub(crate) async fn claimers_of_several_processes_never_share_a_job(db: Db) {
    let qn = "spread";
    let n = 2_000usize;
    enqueue(&db, (0..n).map(|_| job(qn, "{}")).collect(), db.now).await;
    let mut handles = vec![];
    for w in 0..4 {
        let b = db.connect_again().await;
        let strategy = db.strategy();
        let now = db.now;
        handles.push(tokio::spawn(async move {
            let mut claimers = vec![];
            for c in 0..4 {
                let b = b.clone();
                claimers.push(tokio::spawn(async move {
                    let (mut mine, mut empty) = (vec![], 0);
                    while empty < 3 {
                        let mut p = claim(qn, 20, now, strategy);
                        p.owner = format!("p{w}-c{c}");
                        let got = transient_retried(|| b.job_claim(&p)).await;
                        if got.is_empty() {
                            empty += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                        empty = 0;
                        let refs: Vec<JobRef> = got.iter().map(|c| c.job_ref()).collect();
                        // A completion that failed for now is sent again: the lease token
                        // makes a repeat safe.
                        let done = transient_retried(|| {
                            b.job_complete(JobCompleteParams {
                                jobs: refs.clone(),
                                now,
                                retention: Retention::Keep,
                            })
                        })
                        .await;
                        assert_eq!(done.len(), refs.len(), "a claimed job was not completed");
                        mine.extend(got.iter().map(|c| c.id));
                    }
                    mine
                }));
            }
            let mut mine = vec![];
            for c in claimers {
                mine.extend(c.await.unwrap());
            }
            b.close().await;
            mine
        }));
    }
    let mut all = vec![];
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a job was handed to two claimers"
    );
    assert_eq!(all.len(), n, "jobs were lost");
    assert_eq!(pending(&db, &[qn]).await, 0);
}

/// `op` until it succeeds, again after each transient error (a call the backend itself gave up
/// retrying, such as a claim that lost certification on a Galera cluster again and again), at
/// most 100 times.
pub(crate) async fn transient_retried<T, F, Fut>(mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    for _ in 0..100 {
        match op().await {
            Ok(v) => return v,
            Err(e) if e.is_transient() => {
                tokio::time::sleep(Duration::from_millis(5 + rand::random::<u64>() % 20)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("still failing after 100 tries");
}

/// Workers that complete each batch with their next claim (as the runtime does): no job reaches
/// two of them, none is lost, and every completion counts.
pub(crate) async fn concurrent_complete_claim_loops(db: Db) {
    for strategy in db.strategies() {
        let qn = format!("loop-{}", harness::strategy_name(strategy));
        let n = 5_000usize;
        enqueue(&db, (0..n).map(|_| job(&qn, "{}")).collect(), db.now).await;
        let mut handles = vec![];
        for w in 0..8 {
            let (b, qn, now) = (db.b.clone(), qn.clone(), db.now);
            handles.push(tokio::spawn(async move {
                let (mut mine, mut completed) = (vec![], 0usize);
                let mut held: Vec<JobRef> = vec![];
                let (mut empty, mut full) = (0, false);
                while empty < 3 {
                    let mut p = claim(&qn, 25, now, strategy);
                    p.owner = format!("w{w}");
                    let r = b
                        .job_complete_claim(JobCompleteClaimParams {
                            complete: JobCompleteParams {
                                jobs: std::mem::take(&mut held),
                                now,
                                retention: Retention::Delete,
                            },
                            claim: p,
                            // As a client does: the last claim was full.
                            expect_jobs: full,
                            groups: vec![],
                        })
                        .await
                        .unwrap();
                    completed += r.completed.len();
                    let got = r.claimed.unwrap();
                    full = got.len() == 25;
                    if got.is_empty() {
                        empty += 1;
                        tokio::task::yield_now().await;
                    } else {
                        empty = 0;
                    }
                    mine.extend(got.iter().map(|c| c.id));
                    held = got.iter().map(|c| c.job_ref()).collect();
                }
                assert!(held.is_empty());
                (mine, completed)
            }));
        }
        let (mut all, mut completed) = (vec![], 0);
        for h in handles {
            let (mine, c) = h.await.unwrap();
            all.extend(mine);
            completed += c;
        }
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            all.len(),
            "a job was handed to two workers ({strategy:?})"
        );
        assert_eq!(all.len(), n, "jobs were lost ({strategy:?})");
        assert_eq!(
            completed, n,
            "a claimed job could not be completed ({strategy:?})"
        );
        assert_eq!(pending(&db, &[&qn]).await, 0);
    }
}
