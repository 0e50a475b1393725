#![allow(missing_docs)]
#![allow(dead_code)] // the harness serves two suites, each using part of it
//! Flow control, proven on every backend: ordered groups (one job of a group at a time, or K,
//! in enqueue order; what a failure does to its group; the sweep that catches what no finished
//! job promoted) and global concurrency (never more than N running across processes, sampled
//! all along; slots back after a crash; a limit changed while jobs run).

mod harness;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering as AtomicOrdering};
use std::time::Duration;

use backlog_core::*;
use harness::Db;

const SEC: i64 = 1_000_000;

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn job(queue: &str, n: usize) -> NewJob {
    let payload = Payload::parse(format!("{{\"n\":{n}}}"), DEFAULT_PAYLOAD_LIMIT).unwrap();
    NewJob::new(q(queue), payload)
}

fn grouped(queue: &str, group: &str, n: usize) -> NewJob {
    job(queue, n).in_group(GroupKey::new(group).unwrap())
}

fn claim(db: &Db, queue: &str, limit: u32, now: i64) -> JobClaimParams {
    JobClaimParams {
        queue: q(queue),
        kinds: vec![],
        limit,
        owner: "flow-test".into(),
        lease: Duration::from_secs(30),
        now,
        order: Ordering::Fifo,
        strategy: db.strategy(),
        global_limit: false,
    }
}

async fn ids(db: &Db, jobs: Vec<NewJob>, now: i64) -> Vec<i64> {
    let out =
        db.b.job_insert(JobInsertParams { jobs, now })
            .await
            .unwrap();
    out.into_iter().map(|o| o.id).collect()
}

async fn claimed_ids(db: &Db, queue: &str, now: i64) -> Vec<ClaimedJob> {
    db.b.job_claim(&claim(db, queue, 100, now)).await.unwrap()
}

fn sorted(jobs: &[ClaimedJob]) -> Vec<i64> {
    let mut v: Vec<i64> = jobs.iter().map(|j| j.id).collect();
    v.sort_unstable();
    v
}

async fn complete(db: &Db, jobs: &[ClaimedJob], now: i64) {
    let refs: Vec<JobRef> = jobs.iter().map(|j| j.job_ref()).collect();
    let done =
        db.b.job_complete(JobCompleteParams {
            jobs: refs.clone(),
            now,
            retention: Retention::Keep,
        })
        .await
        .unwrap();
    assert_eq!(done.len(), refs.len());
}

async fn promote(db: &Db, queue: &str, groups: &[&str], now: i64) -> u64 {
    db.b.group_promote(GroupPromoteParams {
        queue: q(queue),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        now,
    })
    .await
    .unwrap()
}

async fn fail(db: &Db, job: &ClaimedJob, now: i64, retry_at: Option<i64>) {
    db.b.job_fail(JobFailParams {
        job: job.job_ref(),
        now,
        error: "boom".into(),
        retry_at,
        cancelled: false,
    })
    .await
    .unwrap();
}

async fn state_of(db: &Db, id: i64) -> JobState {
    db.b.job_get(id).await.unwrap().expect("job exists").state
}

async fn configure(db: &Db, settings: QueueSettings) {
    db.b.queue_upsert(&settings, db.now).await.unwrap();
}

async fn stats(db: &Db, queue: &str) -> QueueStats {
    let all = db.b.queue_stats(Some(&q(queue)), db.now).await.unwrap();
    all.into_iter()
        .find(|(n, _)| n == queue)
        .map(|(_, s)| s)
        .unwrap_or_default()
}

async fn groups_run_one_at_a_time_in_enqueue_order(db: Db) {
    let now = db.now;
    let qn = "g";
    let id = ids(
        &db,
        vec![
            grouped(qn, "a", 1),
            grouped(qn, "b", 1),
            grouped(qn, "a", 2),
            job(qn, 0),
            grouped(qn, "b", 2),
            grouped(qn, "a", 3),
        ],
        now,
    )
    .await;
    let (a1, b1, a2, plain, b2, a3) = (id[0], id[1], id[2], id[3], id[4], id[5]);
    let st = stats(&db, qn).await;
    assert_eq!((st.available, st.waiting), (3, 3), "{st:?}");
    assert_eq!(state_of(&db, a2).await, JobState::Waiting);
    let job = db.b.job_get(a3).await.unwrap().unwrap();
    assert_eq!(job.group.as_deref(), Some("a"));

    // The head of each group, and the job without a group; nothing more.
    let first = claimed_ids(&db, qn, now).await;
    assert_eq!(sorted(&first), vec![a1, b1, plain]);
    let a_head = first.iter().find(|j| j.id == a1).unwrap();
    assert_eq!(a_head.group.as_deref(), Some("a"));
    assert!(claimed_ids(&db, qn, now).await.is_empty());
    // Nothing to promote while the heads run; a job enqueued meanwhile waits behind them.
    assert_eq!(promote(&db, qn, &["a", "b"], now).await, 0);
    let a4 = ids(&db, vec![grouped(qn, "a", 4)], now).await[0];
    assert_eq!(state_of(&db, a4).await, JobState::Waiting);

    // Finishing a1 lets a2 (not a3 or a4) run.
    let a_done: Vec<ClaimedJob> = first.iter().filter(|j| j.id == a1).cloned().collect();
    complete(&db, &a_done, now).await;
    assert_eq!(promote(&db, qn, &["a"], now).await, 1);
    let second = claimed_ids(&db, qn, now).await;
    assert_eq!(sorted(&second), vec![a2]);

    // A failure that will be retried holds its group (the default rule, `block`): b2 waits.
    let b_head = first.iter().find(|j| j.id == b1).unwrap();
    fail(&db, b_head, now, Some(now + 10 * SEC)).await;
    assert_eq!(promote(&db, qn, &["b"], now).await, 0);
    assert_eq!(state_of(&db, b2).await, JobState::Waiting);
    assert!(claimed_ids(&db, qn, now).await.is_empty());
    // b1's retry runs first, then b2.
    let later = now + 11 * SEC;
    let retried = claimed_ids(&db, qn, later).await;
    assert_eq!(sorted(&retried), vec![b1]);
    complete(&db, &retried, later).await;
    assert_eq!(promote(&db, qn, &["b"], later).await, 1);
    assert_eq!(sorted(&claimed_ids(&db, qn, later).await), vec![b2]);

    // a3 then a4, one at a time.
    complete(&db, &second, later).await;
    assert_eq!(promote(&db, qn, &["a"], later).await, 1);
    let third = claimed_ids(&db, qn, later).await;
    assert_eq!(sorted(&third), vec![a3]);
    complete(&db, &third, later).await;
    assert_eq!(promote(&db, qn, &["a"], later).await, 1);
    assert_eq!(sorted(&claimed_ids(&db, qn, later).await), vec![a4]);
}

async fn a_failing_job_lets_its_group_go_on_when_the_queue_says_so(db: Db) {
    let now = db.now;
    let qn = "gnext";
    configure(
        &db,
        QueueSettings {
            group_on_failure: GroupFailure::Next,
            ..QueueSettings::defaults(q(qn))
        },
    )
    .await;
    let id = ids(&db, vec![grouped(qn, "x", 1), grouped(qn, "x", 2)], now).await;
    let first = claimed_ids(&db, qn, now).await;
    assert_eq!(sorted(&first), vec![id[0]]);
    fail(&db, &first[0], now, Some(now + SEC)).await;
    // The failed job waits for its turn again; the next one runs meanwhile.
    assert_eq!(state_of(&db, id[0]).await, JobState::Waiting);
    assert_eq!(promote(&db, qn, &["x"], now).await, 1);
    let second = claimed_ids(&db, qn, now).await;
    assert_eq!(sorted(&second), vec![id[1]]);
    complete(&db, &second, now).await;
    // Its retry is not due yet: nothing moves; once due, it runs.
    assert_eq!(promote(&db, qn, &["x"], now).await, 0);
    let later = now + 2 * SEC;
    assert_eq!(promote(&db, qn, &["x"], later).await, 1);
    let retried = claimed_ids(&db, qn, later).await;
    assert_eq!(sorted(&retried), vec![id[0]]);
    assert_eq!(retried[0].attempt, 2);
}

async fn a_dead_head_lets_its_group_go_on(db: Db) {
    let now = db.now;
    let qn = "gdead";
    let id = ids(&db, vec![grouped(qn, "d", 1), grouped(qn, "d", 2)], now).await;
    let first = claimed_ids(&db, qn, now).await;
    fail(&db, &first[0], now, None).await;
    assert_eq!(state_of(&db, id[0]).await, JobState::Dead);
    assert_eq!(promote(&db, qn, &["d"], now).await, 1);
    assert_eq!(sorted(&claimed_ids(&db, qn, now).await), vec![id[1]]);
    // Redriving the dead head puts it back in its group, behind the one running.
    assert_eq!(
        db.b.queue_redrive(QueueRedriveParams {
            queue: q(qn),
            limit: 10,
            now,
        })
        .await
        .unwrap(),
        1
    );
    assert_eq!(state_of(&db, id[0]).await, JobState::Waiting);
    assert!(claimed_ids(&db, qn, now).await.is_empty());
}

async fn group_concurrency_above_one(db: Db) {
    let now = db.now;
    let qn = "gk";
    configure(
        &db,
        QueueSettings {
            group_concurrency: 2,
            ..QueueSettings::defaults(q(qn))
        },
    )
    .await;
    let id = ids(&db, (1..=5).map(|n| grouped(qn, "k", n)).collect(), now).await;
    let first = claimed_ids(&db, qn, now).await;
    assert_eq!(sorted(&first), vec![id[0], id[1]]);
    complete(&db, &first[..1], now).await;
    assert_eq!(promote(&db, qn, &["k"], now).await, 1);
    assert_eq!(sorted(&claimed_ids(&db, qn, now).await), vec![id[2]]);
    // Raised live to 4: the next promotion fills the group's new room.
    configure(
        &db,
        QueueSettings {
            group_concurrency: 4,
            ..QueueSettings::defaults(q(qn))
        },
    )
    .await;
    assert_eq!(promote(&db, qn, &["k"], now).await, 2);
    assert_eq!(sorted(&claimed_ids(&db, qn, now).await), vec![id[3], id[4]]);
}

async fn the_sweep_promotes_what_no_finished_job_did(db: Db) {
    let now = db.now;
    let qn = "gsweep";
    let id = ids(&db, vec![grouped(qn, "s", 1), grouped(qn, "s", 2)], now).await;
    // An operator cancels the head before it runs: nothing promoted s2 yet.
    db.b.job_admin(id[0], AdminAction::Cancel, now)
        .await
        .unwrap();
    assert_eq!(state_of(&db, id[1]).await, JobState::Waiting);
    assert_eq!(db.b.group_sweep(now).await.unwrap(), 1);
    assert_eq!(state_of(&db, id[1]).await, JobState::Available);
    // A job scheduled for later does not hold its group up, and runs when due.
    let delayed = NewJob {
        run_at: Some(now + 5 * SEC),
        ..grouped(qn, "t", 1)
    };
    let t = ids(&db, vec![delayed, grouped(qn, "t", 2)], now).await;
    assert_eq!(state_of(&db, t[0]).await, JobState::Waiting);
    assert_eq!(state_of(&db, t[1]).await, JobState::Available);
    let got = claimed_ids(&db, qn, now).await;
    assert_eq!(sorted(&got), vec![id[1], t[1]]);
    complete(&db, &got, now).await;
    assert_eq!(db.b.group_sweep(now).await.unwrap(), 0);
    assert_eq!(db.b.group_sweep(now + 6 * SEC).await.unwrap(), 1);
    assert_eq!(
        sorted(&claimed_ids(&db, qn, now + 6 * SEC).await),
        vec![t[0]]
    );
    // A waiting job holds its unique key.
    let keyed = |n| NewJob {
        unique_key: Some(UniqueKey::new("only-one").unwrap()),
        ..grouped(qn, "u", n)
    };
    let u = ids(&db, vec![grouped(qn, "u", 0)], now).await[0];
    let k1 = ids(&db, vec![keyed(1)], now).await[0];
    let k2 = ids(&db, vec![keyed(2)], now).await[0];
    assert_eq!(state_of(&db, k1).await, JobState::Waiting);
    assert_eq!((k1 == k2, u != k1), (true, true));
}

async fn enqueued_in_the_callers_transaction_groups_hold(db: Db) {
    let now = db.now;
    let qn = "gtx";
    let mut tx = db.b.begin().await.unwrap();
    let out = tx
        .enqueue(vec![grouped(qn, "c", 1), grouped(qn, "c", 2)], now)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(state_of(&db, out[0].id).await, JobState::Available);
    assert_eq!(state_of(&db, out[1].id).await, JobState::Waiting);
}

/// Rows inserted by plain SQL as the contract says (`group_key`, state `waiting`) run in order.
async fn plain_sql_inserts_join_their_group(db: Db) {
    let now = db.now;
    let qn = "gsql";
    db.exec_sql(
        "INSERT INTO backlog_job (queue, payload, group_key, state) \
         VALUES ('gsql', '{}', 'p', 'waiting'), ('gsql', '{}', 'p', 'waiting')",
    )
    .await;
    assert!(claimed_ids(&db, qn, now + SEC).await.is_empty());
    assert_eq!(db.b.group_sweep(now + SEC).await.unwrap(), 1);
    let first = claimed_ids(&db, qn, now + SEC).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].group.as_deref(), Some("p"));
    assert_eq!(stats(&db, qn).await.waiting, 1);
}
/// What several processes' workers ran in the ordered groups of a concurrency test: the groups
/// running now and every start in order.
#[derive(Default)]
struct GroupLog(std::sync::Mutex<Runs>);

#[derive(Default)]
struct Runs {
    running: HashSet<String>,
    started: Vec<(String, i64)>,
}

impl GroupLog {
    /// Records the starts of `jobs`: no group may already have one running.
    fn start(&self, jobs: &[ClaimedJob]) {
        let mut l = self.0.lock().unwrap();
        for j in jobs {
            let g = j.group.clone().expect("every job has a group");
            assert!(
                l.running.insert(g.clone()),
                "two jobs of group {g} run at once"
            );
            l.started.push((g, j.id));
        }
    }

    /// Records the ends of `jobs`.
    fn finish(&self, jobs: &[ClaimedJob]) {
        let mut l = self.0.lock().unwrap();
        for j in jobs {
            l.running.remove(j.group.as_deref().unwrap());
        }
    }

    /// Every job of the `groups` groups of `per_group` ran once, each group in enqueue order.
    fn check(&self, groups: usize, per_group: usize) {
        let l = self.0.lock().unwrap();
        let distinct: HashSet<i64> = l.started.iter().map(|(_, id)| *id).collect();
        assert_eq!(
            l.started.len(),
            groups * per_group,
            "every job ran once ({} distinct jobs started)",
            distinct.len()
        );
        for g in 0..groups {
            let order: Vec<i64> = (l.started.iter())
                .filter(|(name_of, _)| *name_of == group_name(g))
                .map(|(_, id)| *id)
                .collect();
            let mut want = order.clone();
            want.sort_unstable();
            assert_eq!(order, want, "group g{g} ran out of enqueue order");
        }
    }
}

fn group_name(g: usize) -> String {
    format!("g{g}")
}

/// The first half of each group's jobs, enqueued before the workers start.
async fn seed_groups(db: &Db, qn: &'static str, groups: usize, per_group: usize) {
    let first: Vec<NewJob> = (0..per_group / 2)
        .flat_map(|n| (0..groups).map(move |g| (g, n)))
        .map(|(g, n)| grouped(qn, &group_name(g), n))
        .collect();
    ids(db, first, db.now).await;
}

/// Process `w` of 3 adds the second half of groups w, w + 3, …, while the workers run: one
/// producer per group keeps its order.
fn produce(
    b: Arc<dyn Backend>,
    qn: &'static str,
    w: usize,
    (groups, per_group): (usize, usize),
    now: i64,
    producing: Arc<AtomicI64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for n in per_group / 2..per_group {
            for g in (w..groups).step_by(3) {
                let jobs = vec![grouped(qn, &group_name(g), n)];
                while let Err(e) = (b.job_insert(JobInsertParams {
                    jobs: jobs.clone(),
                    now,
                }))
                .await
                {
                    assert!(e.is_transient(), "{e}");
                }
            }
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        producing.fetch_sub(1, AtomicOrdering::SeqCst);
    })
}

/// Workers in several processes and producers adding to the groups meanwhile: a group never has
/// two jobs running, and its jobs start in enqueue order.
async fn groups_hold_under_concurrent_claimers_and_producers(db: Db) {
    groups_under_concurrency(db, "gmany", false).await;
}

/// As above, with workers that complete each batch with their next claim (`job_complete_claim`,
/// so turns are handed straight over).
async fn turns_hold_under_concurrent_completing_claimers(db: Db) {
    groups_under_concurrency(db, "gturns", true).await;
}

/// 3 processes of 3 workers each, and a producer in each process adding to the groups while they
/// run; each worker completes its batch and promotes in its groups, or (`fold`) completes it
/// with its next claim. Every job runs once, and the groups hold.
async fn groups_under_concurrency(db: Db, qn: &'static str, fold: bool) {
    let now = db.now;
    let (groups, per_group) = (12usize, 10usize);
    seed_groups(&db, qn, groups, per_group).await;
    let log: Arc<GroupLog> = Arc::default();
    // Workers stop only once every producer is done and they then find nothing for a while: on
    // a loaded Galera cluster a producer's inserts can take longer than the workers' patience.
    let producing = Arc::new(AtomicI64::new(3));
    let mut handles = vec![];
    for w in 0..3 {
        let b = db.connect_again().await;
        let p = JobClaimParams {
            owner: format!("p{w}"),
            ..claim(&db, qn, 4, now)
        };
        let producer = produce(
            b.clone(),
            qn,
            w,
            (groups, per_group),
            now,
            producing.clone(),
        );
        let claimers: Vec<_> = (0..3)
            .map(|_| {
                let (b, p, log, producing) = (b.clone(), p.clone(), log.clone(), producing.clone());
                tokio::spawn(group_worker(b, p, log, fold, producing))
            })
            .collect();
        handles.push(tokio::spawn(async move {
            producer.await.unwrap();
            for c in claimers {
                c.await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    // Completed jobs are deleted: any row left is a job that never ran to the end.
    let left = all_jobs(&db, qn).await;
    let left: Vec<_> = (left.iter())
        .map(|j| (j.id, j.group.clone(), j.state, j.run_at - now))
        .collect();
    assert!(left.is_empty(), "jobs left behind: {left:?}");
    log.check(groups, per_group);
}

/// Every job of a queue, in any state.
async fn all_jobs(db: &Db, queue: &str) -> Vec<Job> {
    db.b.job_list(JobListParams {
        queue: Some(q(queue)),
        state: None,
        kind: None,
        unique_key: None,
        after_id: 0,
        limit: 1000,
        now: db.now,
    })
    .await
    .unwrap()
}

/// One worker of `groups_under_concurrency`: until its claims find nothing 60 times in a row
/// after the producers (`producing` of them still at work) are done.
async fn group_worker(
    b: Arc<dyn Backend>,
    p: JobClaimParams,
    log: Arc<GroupLog>,
    fold: bool,
    producing: Arc<AtomicI64>,
) {
    let (now, qn) = (p.now, p.queue.clone());
    let (mut empty, mut idle, mut got) = (0, 0, vec![]);
    while empty < 60 {
        if got.is_empty() {
            got = match b.job_claim(&p).await {
                Ok(got) => got,
                Err(e) if e.is_transient() => continue,
                Err(e) => panic!("{e}"),
            };
        }
        if got.is_empty() {
            if producing.load(AtomicOrdering::SeqCst) == 0 {
                empty += 1;
            }
            idle += 1;
            // What a worker's rescue pass does: promotions a crash or a race left.
            if idle % 10 == 0 {
                let _ = b.group_sweep(now).await;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        empty = 0;
        log.start(&got);
        tokio::time::sleep(Duration::from_millis(2)).await;
        log.finish(&got);
        let complete = JobCompleteParams {
            jobs: got.iter().map(|c| c.job_ref()).collect(),
            now,
            retention: Retention::Delete,
        };
        let groups: Vec<String> = got.iter().filter_map(|j| j.group.clone()).collect();
        if fold {
            let params = JobCompleteClaimParams {
                complete,
                claim: p.clone(),
                expect_jobs: true,
                groups,
            };
            got = loop {
                match b.job_complete_claim(params.clone()).await {
                    Ok(r) => {
                        assert_eq!(r.completed.len(), params.complete.jobs.len());
                        break r.claimed.unwrap();
                    }
                    Err(e) if e.is_transient() => continue,
                    Err(e) => panic!("{e}"),
                }
            };
            continue;
        }
        got = vec![];
        while let Err(e) = b.job_complete(complete.clone()).await {
            assert!(e.is_transient(), "{e}");
        }
        let promote = GroupPromoteParams {
            queue: qn.clone(),
            groups,
            now,
        };
        while let Err(e) = b.group_promote(promote.clone()).await {
            assert!(e.is_transient(), "{e}");
        }
    }
}

/// A worker's completion with its next claim promotes in the finished jobs' groups in the same
/// call (and commit, where the backend folds the two).
async fn completing_with_the_next_claim_promotes(db: Db) {
    let now = db.now;
    let qn = "gcc";
    let id = ids(
        &db,
        vec![
            grouped(qn, "a", 1),
            grouped(qn, "a", 2),
            grouped(qn, "b", 1),
        ],
        now,
    )
    .await;
    let first = claimed_ids(&db, qn, now).await;
    assert_eq!(sorted(&first), vec![id[0], id[2]]);
    let a1: Vec<JobRef> = first
        .iter()
        .filter(|j| j.id == id[0])
        .map(|j| j.job_ref())
        .collect();
    for expect_jobs in [true, false] {
        let r =
            db.b.job_complete_claim(JobCompleteClaimParams {
                complete: JobCompleteParams {
                    jobs: a1.clone(),
                    now,
                    retention: Retention::Delete,
                },
                claim: claim(&db, qn, 10, now),
                expect_jobs,
                groups: vec!["a".into()],
            })
            .await
            .unwrap();
        if !expect_jobs {
            // Done already: nothing to promote the second time (a2 runs).
            assert_eq!(r.promoted, 0);
            break;
        }
        assert_eq!(r.completed, a1);
        let mut got = r.claimed.unwrap();
        // a2's turn: handed straight over (then claimed here), or promoted.
        let handed = got.iter().any(|j| j.id == id[1]);
        assert!(handed || r.promoted == 1);
        got.extend(claimed_ids(&db, qn, now).await);
        assert_eq!(
            sorted(&got),
            vec![id[1]],
            "a2 runs next, in this claim or the next"
        );
    }
}

/// `job_complete_claim` of finished jobs of ordered groups with the claim's `limit` and `kinds`.
async fn complete_claim(
    db: &Db,
    qn: &str,
    finished: &[JobRef],
    groups: &[&str],
    limit: u32,
    kinds: &[&str],
) -> CompleteClaimed {
    let now = db.now;
    db.b.job_complete_claim(JobCompleteClaimParams {
        complete: JobCompleteParams {
            jobs: finished.to_vec(),
            now,
            retention: Retention::Delete,
        },
        claim: JobClaimParams {
            kinds: kinds.iter().map(|k| Kind::new(*k).unwrap()).collect(),
            ..claim(db, qn, limit, now)
        },
        expect_jobs: false,
        groups: groups.iter().map(|g| g.to_string()).collect(),
    })
    .await
    .unwrap()
}

/// A finished job's turn in its group goes to the group's next job in the call that completes
/// it, whether handed straight over or promoted and claimed; and never where the finished job's
/// lease was lost, where the claim takes no more, where the next job is of a kind the claimer does
/// not run, or where the queue is paused: the next job is then available for the next claim.
async fn a_finished_jobs_turn_goes_to_its_groups_next_job(db: Db) {
    let now = db.now;
    let qn = "gturn";
    let mut jobs = vec![
        grouped(qn, "a", 1),
        grouped(qn, "a", 2),
        grouped(qn, "a", 3),
        grouped(qn, "b", 1),
        grouped(qn, "b", 2),
        grouped(qn, "c", 1),
        grouped(qn, "c", 2),
    ];
    for j in &mut jobs {
        j.kind = Some(Kind::new("k").unwrap());
    }
    jobs[6].kind = Some(Kind::new("other").unwrap());
    let id = ids(&db, jobs, now).await;
    let first = claimed_ids(&db, qn, now).await;
    assert_eq!(sorted(&first), vec![id[0], id[3], id[5]]);
    let held = |n: i64| first.iter().find(|j| j.id == n).unwrap().job_ref();
    // a1 done: a2 runs, in this very call; a3 waits its turn.
    let r = complete_claim(&db, qn, &[held(id[0])], &["a"], 1, &[]).await;
    assert_eq!(r.completed, vec![held(id[0])]);
    let a2 = r.claimed.unwrap();
    assert_eq!(sorted(&a2), vec![id[1]]);
    assert_eq!(a2[0].group.as_deref(), Some("a"));
    assert_eq!(a2[0].attempt, 1);
    assert_eq!(state_of(&db, id[1]).await, JobState::Running);
    assert_eq!(state_of(&db, id[2]).await, JobState::Waiting);
    // a2's lease lost (another token): nothing completed, nothing handed over.
    let mut lost = a2[0].job_ref();
    lost.token = lost.token.wrapping_add(1);
    let r = complete_claim(&db, qn, &[lost], &["a"], 5, &[]).await;
    assert!(r.completed.is_empty());
    assert!(r.claimed.unwrap().is_empty());
    assert_eq!(state_of(&db, id[1]).await, JobState::Running);
    assert_eq!(state_of(&db, id[2]).await, JobState::Waiting);
    // No room in the claim: a2 done, a3 made available for the next claim.
    let r = complete_claim(&db, qn, &[a2[0].job_ref()], &["a"], 0, &[]).await;
    assert_eq!(r.completed.len(), 1);
    assert!(r.claimed.unwrap().is_empty());
    assert_eq!(state_of(&db, id[2]).await, JobState::Available);
    // c2 is of a kind this claimer does not run: c1 done, c2 available to others.
    let r = complete_claim(&db, qn, &[held(id[5])], &["c"], 5, &["k"]).await;
    assert_eq!(r.completed.len(), 1);
    assert_eq!(sorted(&r.claimed.unwrap()), vec![id[2]], "a3, not c2");
    assert_eq!(state_of(&db, id[6]).await, JobState::Available);
    // Paused: b1 done, b2 available for when the queue resumes.
    db.b.queue_set_paused(&q(qn), true, now).await.unwrap();
    let r = complete_claim(&db, qn, &[held(id[3])], &["b"], 5, &[]).await;
    assert_eq!(r.completed.len(), 1);
    assert!(r.claimed.unwrap().is_empty());
    assert_eq!(state_of(&db, id[4]).await, JobState::Available);
    db.b.queue_set_paused(&q(qn), false, now).await.unwrap();
    assert_eq!(sorted(&claimed_ids(&db, qn, now).await), vec![id[4], id[6]]);
}

fn limited(db: &Db, queue: &str, limit: u32, now: i64, owner: &str) -> JobClaimParams {
    JobClaimParams {
        global_limit: true,
        owner: owner.into(),
        ..claim(db, queue, limit, now)
    }
}

async fn global_concurrency_holds_across_processes(db: Db) {
    let now = db.now;
    let qn = "glim";
    let max = 3;
    configure(
        &db,
        QueueSettings {
            global_concurrency: Some(max),
            ..QueueSettings::defaults(q(qn))
        },
    )
    .await;
    let n = 240;
    ids(&db, (0..n).map(|i| job(qn, i)).collect(), now).await;
    // A claim that does not know of the limit (a stale setting) finds nothing.
    assert!(claimed_ids(&db, qn, now).await.is_empty());

    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicI64::new(0));
    let sampler = {
        let (b, done, most) = (db.b.clone(), done.clone(), most.clone());
        tokio::spawn(async move {
            let mut samples = 0;
            while !done.load(AtomicOrdering::Relaxed) {
                // The running jobs, read in one statement: when there are too many, which
                // claims (owner, token) broke the limit.
                let held = (b.job_list(JobListParams {
                    queue: Some(q(qn)),
                    state: Some(StateFilter::Stored(JobState::Running)),
                    kind: None,
                    unique_key: None,
                    after_id: 0,
                    limit: 100,
                    now,
                }))
                .await
                .unwrap();
                let running = held.len() as i64;
                if running > i64::from(max) {
                    let held: Vec<_> = (held.iter())
                        .map(|j| (j.id, j.lease_owner.clone(), j.lease_token))
                        .collect();
                    panic!("{running} running, limit {max}: {held:?}");
                }
                most.fetch_max(running, AtomicOrdering::Relaxed);
                samples += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            samples
        })
    };
    let mut handles = vec![];
    for w in 0..3 {
        let b = db.connect_again().await;
        let p0 = limited(&db, qn, 5, now, "");
        handles.push(tokio::spawn(async move {
            let mut claimers = vec![];
            for c in 0..3 {
                let b = b.clone();
                let mut p = p0.clone();
                p.owner = format!("p{w}-c{c}");
                claimers.push(tokio::spawn(async move {
                    let (mut mine, mut empty) = (vec![], 0);
                    while empty < 40 {
                        let got = match b.job_claim(&p).await {
                            Ok(got) => got,
                            Err(e) if e.is_transient() => continue,
                            Err(e) => panic!("{e}"),
                        };
                        if got.is_empty() {
                            empty += 1;
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            continue;
                        }
                        empty = 0;
                        assert!(got.len() <= max as usize);
                        tokio::time::sleep(Duration::from_millis(3)).await;
                        let refs: Vec<JobRef> = got.iter().map(|c| c.job_ref()).collect();
                        loop {
                            let params = JobCompleteParams {
                                jobs: refs.clone(),
                                now,
                                retention: Retention::Delete,
                            };
                            match b.job_complete(params).await {
                                Ok(done) => {
                                    assert_eq!(done.len(), refs.len());
                                    break;
                                }
                                Err(e) if e.is_transient() => continue,
                                Err(e) => panic!("{e}"),
                            }
                        }
                        mine.extend(got.iter().map(|c| c.id));
                    }
                    mine
                }));
            }
            let mut mine = vec![];
            for c in claimers {
                mine.extend(c.await.unwrap());
            }
            mine
        }));
    }
    let mut all = vec![];
    for h in handles {
        all.extend(h.await.unwrap());
    }
    done.store(true, AtomicOrdering::Relaxed);
    let samples = sampler.await.unwrap();
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a job was handed out twice");
    assert_eq!(all.len(), n, "jobs were left");
    assert!(samples > 10, "the sampler looked {samples} times");
    assert!(most.load(AtomicOrdering::Relaxed) >= 1);
}

async fn global_limit_after_a_crash_and_changed_live(db: Db) {
    let now = db.now;
    let qn = "glive";
    let settings = |limit| QueueSettings {
        global_concurrency: limit,
        ..QueueSettings::defaults(q(qn))
    };
    configure(&db, settings(Some(2))).await;
    ids(&db, (0..6).map(|i| job(qn, i)).collect(), now).await;
    let mut short = limited(&db, qn, 10, now, "crashes");
    short.lease = Duration::from_secs(1);
    assert_eq!(db.b.job_claim(&short).await.unwrap().len(), 2);
    let again = limited(&db, qn, 10, now, "w");
    assert!(db.b.job_claim(&again).await.unwrap().is_empty());
    // The claimer dies (kill -9): its leases run out, the rescue gives the slots back.
    let later = now + 2 * SEC;
    let rescued =
        db.b.job_rescue(JobRescueParams {
            now: later,
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(rescued.len(), 2);
    let mut p = limited(&db, qn, 10, later, "w");
    let running = db.b.job_claim(&p).await.unwrap();
    assert_eq!(running.len(), 2);
    // Lowered to 1 while 2 run: nothing more until fewer than 1 run.
    configure(&db, settings(Some(1))).await;
    complete(&db, &running[..1], later).await;
    assert!(db.b.job_claim(&p).await.unwrap().is_empty());
    complete(&db, &running[1..], later).await;
    p.limit = 10;
    let one = db.b.job_claim(&p).await.unwrap();
    assert_eq!(one.len(), 1);
    // Lifted: claims without the limit take the rest.
    configure(&db, settings(None)).await;
    let rest = claimed_ids(&db, qn, later).await;
    assert_eq!(rest.len(), 3);
    // A claim that still thinks the queue limited works too (a setting read before the change).
    assert!(db.b.job_claim(&p).await.unwrap().is_empty());
}

async fn rate_limit_holds_across_processes(db: Db) {
    let now = db.now;
    let qn = "grate";
    let settings = |rate| QueueSettings {
        rate_limit: rate,
        ..QueueSettings::defaults(q(qn))
    };
    configure(
        &db,
        settings(Some(RateLimit {
            starts: 5,
            period: Duration::from_secs(1),
        })),
    )
    .await;
    ids(&db, (0..40).map(|i| job(qn, i)).collect(), now).await;
    let take = |at: i64| {
        let b = db.b.clone();
        let p = limited(&db, qn, 100, at, "r");
        async move { b.job_claim(&p).await.unwrap().len() }
    };
    // A claim that does not know of the limit finds nothing.
    assert!(claimed_ids(&db, qn, now).await.is_empty());
    // A full bucket, then nothing until tokens come back: 5 per second, 2 in 0.4 s.
    assert_eq!(take(now).await, 5);
    assert_eq!(take(now).await, 0);
    assert_eq!(take(now + 400_000).await, 2);
    assert_eq!(take(now + 400_000).await, 0);
    // Never more than the bucket holds, however long it was left.
    assert_eq!(take(now + 60 * SEC).await, 5);
    // Claimers of three processes at one moment share one bucket.
    let at = now + 120 * SEC;
    let mut handles = vec![];
    for w in 0..3 {
        let b = db.connect_again().await;
        let p = limited(&db, qn, 100, at, &format!("p{w}"));
        handles.push(tokio::spawn(async move {
            let mut got = 0;
            for _ in 0..3 {
                loop {
                    match b.job_claim(&p).await {
                        Ok(jobs) => {
                            got += jobs.len();
                            break;
                        }
                        Err(e) if e.is_transient() => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            got
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    assert_eq!(total, 5, "three processes took {total} of a bucket of 5");
    // Lifted: the rest without a limit.
    configure(&db, settings(None)).await;
    assert_eq!(claimed_ids(&db, qn, at).await.len(), 40 - 17);
}

fn group_rate(starts: u32, period: Duration) -> Option<RateLimit> {
    Some(RateLimit { starts, period })
}

async fn a_group_rate_limit_paces_each_group(db: Db) {
    let now = db.now;
    let qn = "grpace";
    let settings = |rate| QueueSettings {
        group_rate_limit: rate,
        ..QueueSettings::defaults(q(qn))
    };
    configure(&db, settings(group_rate(2, Duration::from_secs(1)))).await;
    let id = ids(
        &db,
        vec![
            grouped(qn, "a", 1),
            grouped(qn, "b", 1),
            grouped(qn, "a", 2),
            grouped(qn, "a", 3),
            grouped(qn, "b", 2),
            grouped(qn, "a", 4),
            job(qn, 0),
        ],
        now,
    )
    .await;
    let (a3, a4) = (id[3], id[5]);
    let take = |at: i64| {
        let b = db.b.clone();
        let p = limited(&db, qn, 100, at, "r");
        async move { b.job_claim(&p).await.unwrap() }
    };
    // A claim that does not know of the limit finds nothing.
    assert!(claimed_ids(&db, qn, now).await.is_empty());
    // Each group's bucket holds two starts: its first two jobs run at once, one after the other.
    let first = take(now).await;
    assert_eq!(sorted(&first), vec![id[0], id[1], id[6]]);
    complete(&db, &first, now).await;
    assert_eq!(promote(&db, qn, &["a", "b"], now).await, 2);
    let second = take(now).await;
    assert_eq!(sorted(&second), vec![id[2], id[4]]);
    complete(&db, &second, now).await;
    // Group a's bucket is empty: its third job is made available, due when a token is back
    // (half a second: two per second), and shown as held by the rate limit.
    assert_eq!(promote(&db, qn, &["a", "b"], now).await, 1);
    assert!(take(now).await.is_empty());
    let held = db.b.job_get(a3).await.unwrap().unwrap();
    assert_eq!(
        (held.state, held.run_at),
        (JobState::Available, now + SEC / 2)
    );
    // Counted once, as scheduled or (due within the second, as the counts tell time) available.
    let st = stats(&db, qn).await;
    assert_eq!((st.scheduled + st.available, st.running), (1, 0), "{st:?}");
    let flow = db.b.queue_flow(&q(qn), now).await.unwrap();
    assert_eq!(flow.blocked.len(), 1, "{flow:?}");
    let b = &flow.blocked[0];
    assert_eq!(
        (b.group.as_str(), b.job_id, b.retry_at, b.reason, b.waiting),
        ("a", a3, now + SEC / 2, BlockReason::Rate, 1)
    );
    assert!(take(now + SEC / 2 - 1).await.is_empty());
    let third = take(now + SEC / 2).await;
    assert_eq!(sorted(&third), vec![a3]);
    complete(&db, &third, now + SEC / 2).await;
    promote(&db, qn, &["a"], now + SEC / 2).await;
    assert_eq!(db.b.job_get(a4).await.unwrap().unwrap().run_at, now + SEC);
    assert_eq!(sorted(&take(now + SEC).await), vec![a4]);

    // A job claimed later than it was due started then: its group's next jobs are paced from
    // that start, not from when it was due (or two would start at once beside it).
    let c = ids(&db, (1..=3).map(|i| grouped(qn, "c", i)).collect(), now).await;
    let late = now + 3 * SEC;
    let c1 = take(late).await;
    assert_eq!(sorted(&c1), vec![c[0]]);
    complete(&db, &c1, late).await;
    promote(&db, qn, &["c"], late).await;
    let c2 = take(late).await;
    assert_eq!(sorted(&c2), vec![c[1]]);
    complete(&db, &c2, late).await;
    promote(&db, qn, &["c"], late).await;
    assert!(take(late).await.is_empty());
    assert_eq!(
        db.b.job_get(c[2]).await.unwrap().unwrap().run_at,
        late + SEC / 2
    );

    // Lifted: the next turn is not paced, and claims without the limit take it.
    configure(&db, settings(None)).await;
    let d = ids(&db, (1..=3).map(|i| grouped(qn, "d", i)).collect(), late).await;
    for (i, &id) in d.iter().enumerate() {
        let got = claimed_ids(&db, qn, late).await;
        let mine: Vec<i64> = got.iter().map(|j| j.id).filter(|j| d.contains(j)).collect();
        assert_eq!(mine, vec![id], "turn {i}");
        complete(&db, &got, late).await;
        promote(&db, qn, &["c", "d"], late).await;
    }
}

/// Three processes claim and complete in eight groups under a group rate limit of 3 per second,
/// on a shared clock that moves on with every step: in each group, the starts keep the limit's
/// token bucket (in any stretch of time t, at most 3 + t × 3/s) and enqueue order.
async fn group_rate_limit_holds_across_processes(db: Db) {
    let qn = "grpar";
    let limit = RateLimit {
        starts: 3,
        period: Duration::from_secs(1),
    };
    configure(
        &db,
        QueueSettings {
            group_rate_limit: Some(limit),
            ..QueueSettings::defaults(q(qn))
        },
    )
    .await;
    let (groups, each) = (8, 12);
    let jobs = (0..each)
        .flat_map(|i| (0..groups).map(move |g| grouped(qn, &format!("g{g}"), i)))
        .collect();
    ids(&db, jobs, db.now).await;
    let clock = Arc::new(AtomicI64::new(db.now));
    let log = Arc::new(std::sync::Mutex::new(Vec::<(String, i64, i64)>::new()));
    let done = Arc::new(AtomicBool::new(false));
    let total = groups * each;
    let mut handles = vec![];
    for w in 0..3 {
        let b = db.connect_again().await;
        let (clock, log, done) = (clock.clone(), log.clone(), done.clone());
        let base = limited(&db, qn, 4, 0, &format!("p{w}"));
        handles.push(tokio::spawn(async move {
            let mut steps = 0;
            // Until every job has started (the loop must not wait for the test's own task to see
            // it: on a loaded machine that task may wake late while these spin on).
            while !done.load(AtomicOrdering::SeqCst) && log.lock().unwrap().len() < total {
                steps += 1;
                assert!(steps < 20_000, "no end in sight");
                let now = clock.fetch_add(5_000, AtomicOrdering::SeqCst);
                let p = JobClaimParams {
                    now,
                    ..base.clone()
                };
                let got = match b.job_claim(&p).await {
                    Ok(got) => got,
                    Err(e) if e.is_transient() => continue,
                    Err(e) => panic!("{e}"),
                };
                if got.is_empty() {
                    tokio::task::yield_now().await;
                    continue;
                }
                for j in &got {
                    let group = j.group.clone().expect("grouped");
                    log.lock().unwrap().push((group, j.id, now));
                }
                let refs: Vec<JobRef> = got.iter().map(|j| j.job_ref()).collect();
                let mut groups: Vec<String> = got.iter().filter_map(|j| j.group.clone()).collect();
                groups.sort_unstable();
                groups.dedup();
                loop {
                    let complete = b.job_complete(JobCompleteParams {
                        jobs: refs.clone(),
                        now,
                        retention: Retention::Keep,
                    });
                    match complete.await {
                        Ok(_) => break,
                        Err(e) if e.is_transient() => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
                loop {
                    let promote = b.group_promote(GroupPromoteParams {
                        queue: q(qn),
                        groups: groups.clone(),
                        now,
                    });
                    match promote.await {
                        Ok(_) => break,
                        Err(e) if e.is_transient() => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }));
    }
    let started = std::time::Instant::now();
    while log.lock().unwrap().len() < total {
        assert!(started.elapsed() < Duration::from_secs(120), "stalled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.store(true, AtomicOrdering::SeqCst);
    for h in handles {
        h.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let step = limit.step();
    for g in 0..groups {
        let name = format!("g{g}");
        let starts: Vec<(i64, i64)> = (log.iter())
            .filter(|(group, _, _)| *group == name)
            .map(|&(_, id, at)| (id, at))
            .collect();
        assert_eq!(starts.len(), each, "{name}");
        assert!(
            starts.windows(2).all(|w| w[0].0 < w[1].0),
            "{name} out of order: {starts:?}"
        );
        // In time order: each claimer took its time from the shared clock just before its
        // claim, and claims reach the database in their own order, so a later job of the group
        // can carry a time a few steps earlier than the one before it.
        let mut times: Vec<i64> = starts.iter().map(|&(_, at)| at).collect();
        times.sort_unstable();
        for k in 0..times.len() {
            for m in k + 1..times.len() {
                let n = (m - k + 1) as i64;
                assert!(
                    (n - i64::from(limit.starts)) * step <= times[m] - times[k],
                    "{name}: {n} starts in {} µs: {starts:?}",
                    times[m] - times[k]
                );
            }
        }
        // The limit held them back: twelve starts at three a second take three seconds.
        let span = times.last().unwrap() - times[0];
        assert!(span >= 3 * SEC - step, "{name}: {span} µs");
    }
}

harness::conformance!(
    groups_run_one_at_a_time_in_enqueue_order,
    a_failing_job_lets_its_group_go_on_when_the_queue_says_so,
    a_dead_head_lets_its_group_go_on,
    group_concurrency_above_one,
    the_sweep_promotes_what_no_finished_job_did,
    enqueued_in_the_callers_transaction_groups_hold,
    groups_hold_under_concurrent_claimers_and_producers,
    completing_with_the_next_claim_promotes,
    a_finished_jobs_turn_goes_to_its_groups_next_job,
    turns_hold_under_concurrent_completing_claimers,
    global_concurrency_holds_across_processes,
    global_limit_after_a_crash_and_changed_live,
    rate_limit_holds_across_processes,
    a_group_rate_limit_paces_each_group,
    group_rate_limit_holds_across_processes;
    sql_only: plain_sql_inserts_join_their_group,
);
