//! The counts the database keeps (schema version 19) against a scan of every job: equal after a
//! randomized run of every kind of change, by the runtime's statements, the operator's and
//! plain SQL, and after the leader folds them.

use super::*;

/// A small deterministic generator: the seed is printed, so a failing run can be made again
/// (`BACKLOG_COUNTS_SEED`).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

const QUEUES: [&str; 3] = ["ca", "cb", "cc"];

/// A whole second from now: the counts tell a job due later apart by the second, the scan by
/// the microsecond, and they agree on whole seconds.
fn later(now: i64, secs: i64) -> i64 {
    (now / SEC + secs) * SEC
}

/// A worker's call that a rescue may have fenced off (the lease taken back): changes nothing.
fn fenced(res: Result<()>) {
    match res {
        Ok(()) | Err(Error::LeaseLost { .. }) => {}
        Err(e) => panic!("{e}"),
    }
}

/// Kept counts and a scan at a fresh time (never before a write the triggers classified).
pub(crate) async fn assert_counts_match(db: &Db, when: &str) {
    let now = now_micros();
    let kept = db.b.queue_stats(None, now).await.unwrap();
    let scan = db.b.queue_stats_scan(None, now).await.unwrap();
    assert_eq!(kept, scan, "{when}: the kept counts differ from a scan");
    for name in QUEUES {
        let one = db.b.queue_stats(Some(&q(name)), now).await.unwrap();
        // A queue with no job yet is listed alone (it was named), with nothing counted.
        let all = kept.iter().find(|(n, _)| n == name).map(|(_, s)| s.clone());
        let one = one.into_iter().next().map(|(_, s)| s);
        assert_eq!(
            one,
            Some(all.unwrap_or_default()),
            "{when}: queue {name} alone"
        );
    }
}

pub(crate) async fn kept_counts_equal_a_scan(db: Db) {
    let db = &db;
    let seed = std::env::var("BACKLOG_COUNTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::random::<u64>() | 1);
    eprintln!("kept_counts_equal_a_scan: BACKLOG_COUNTS_SEED={seed}");
    let mut rng = Rng(seed);
    let mut running: Vec<JobRef> = vec![];
    for step in 0..120 {
        let now = now_micros();
        let queue = QUEUES[rng.below(3) as usize];
        match rng.below(12) {
            0..=2 => {
                let jobs = (0..1 + rng.below(8))
                    .map(|i| {
                        let mut j = job(queue, "{}");
                        j.priority = rng.below(3) as i16;
                        if rng.below(3) == 0 {
                            j.run_at = Some(later(now, 1 + rng.below(90) as i64));
                        }
                        if rng.below(5) == 0 {
                            j.unique_key = Some(UniqueKey::new(format!("k{step}-{i}")).unwrap());
                        }
                        j
                    })
                    .collect();
                enqueue(db, jobs, now).await;
            }
            3 | 4 => {
                let limit = 1 + rng.below(6) as u32;
                let got =
                    db.b.job_claim(&claim(queue, limit, now, db.strategy()))
                        .await
                        .unwrap();
                running.extend(got.iter().map(|c| c.job_ref()));
            }
            5 if !running.is_empty() => {
                let n = 1 + rng.below(running.len() as u64) as usize;
                let refs: Vec<JobRef> = running.drain(..n.min(running.len())).collect();
                let retention = match rng.below(3) {
                    0 => Retention::Keep,
                    1 => Retention::Delete,
                    _ => Retention::Archive,
                };
                complete(db, refs, now, retention).await;
            }
            6 if !running.is_empty() => {
                let r = running.remove(0);
                let retry_at = match rng.below(2) {
                    0 => Some(later(now, 1 + rng.below(60) as i64)),
                    _ => None,
                };
                let params = JobFailParams {
                    job: r,
                    now,
                    error: "boom".into(),
                    cancelled: false,
                    retry_at,
                };
                fenced(db.b.job_fail(params).await);
            }
            7 if !running.is_empty() => {
                let r = running.remove(0);
                let run_at = match rng.below(2) {
                    0 => now,
                    _ => later(now, 5),
                };
                let params = JobReleaseParams {
                    job: r,
                    now,
                    run_at,
                };
                fenced(db.b.job_release(params).await);
            }
            8 => {
                // An operator's action on some job of the queue, whatever its state.
                let list =
                    db.b.job_list(JobListParams {
                        queue: Some(q(queue)),
                        state: None,
                        kind: None,
                        unique_key: None,
                        after_id: 0,
                        limit: 20,
                        now,
                    })
                    .await
                    .unwrap();
                if let Some(j) = list.get(rng.below(list.len().max(1) as u64) as usize) {
                    let action = [
                        AdminAction::Cancel,
                        AdminAction::Hold,
                        AdminAction::Release,
                        AdminAction::Retry,
                        AdminAction::RunNow,
                    ][rng.below(5) as usize];
                    // Refused when the job's state does not allow it: nothing changes then.
                    let _ = db.b.job_admin(j.id, action, now).await;
                    running.retain(|r| r.id != j.id);
                }
            }
            9 => {
                let state = [JobState::Completed, JobState::Dead, JobState::Cancelled]
                    [rng.below(3) as usize];
                let params = JobPruneParams {
                    queue: q(queue),
                    state,
                    finished_before: now + SEC,
                    limit: 1 + rng.below(5) as u32,
                    archive: rng.below(2) == 0,
                };
                db.b.job_prune(params).await.unwrap();
            }
            10 => {
                let params = QueueRedriveParams {
                    queue: q(queue),
                    limit: 1 + rng.below(5) as u32,
                    now,
                };
                db.b.queue_redrive(params).await.unwrap();
            }
            _ => {
                // Leases that ran out: rescued as if a minute had passed.
                let params = JobRescueParams {
                    now: now + 60 * SEC,
                    limit: 1 + rng.below(4) as u32,
                };
                // The rescued jobs' leases are stale: their fail or release is fenced off.
                db.b.job_rescue(params).await.unwrap();
            }
        }
        if step % 40 == 39 {
            assert_counts_match(db, &format!("step {step}")).await;
            db.b.count_fold(now_micros()).await.unwrap();
            assert_counts_match(db, &format!("step {step}, folded")).await;
        }
    }
    // Plain SQL: a producer's insert and a consumer that completes in place.
    if db.engine != harness::Engine::Memory {
        let now = now_micros();
        db.exec_sql(&format!(
            "INSERT INTO backlog_job (queue, payload, run_at, created_at) \
             VALUES ('cc', '{{}}', {now}, {now}), ('cc', '{{}}', {}, {now})",
            later(now, 30)
        ))
        .await;
        if let Some(r) = running.first() {
            db.exec_sql(&format!(
                "UPDATE backlog_job SET state = 'completed', finished_at = {now}, \
                 lease_token = NULL, lease_expires_at = NULL WHERE id = {}",
                r.id
            ))
            .await;
        }
    }
    assert_counts_match(db, "the end").await;
    db.b.count_fold(now_micros()).await.unwrap();
    assert_counts_match(db, "the end, folded").await;
    // Two minutes on, every job due later is due: the folds say so too.
    let on = now_micros() + 120 * SEC;
    db.b.count_fold(on).await.unwrap();
    let kept = db.b.queue_stats(None, on).await.unwrap();
    let scan = db.b.queue_stats_scan(None, on).await.unwrap();
    assert_eq!(kept, scan, "two minutes on");
    assert!(
        kept.iter()
            .all(|(_, s)| s.scheduled == 0 && s.retrying == 0)
    );
    // The run moved jobs through several states (a run that did nothing would prove nothing).
    let mut sum = QueueStats::default();
    for (_, s) in &kept {
        sum.available += s.available;
        sum.running += s.running;
        sum.completed += s.completed;
        sum.dead += s.dead + s.cancelled + s.held;
        sum.archived += s.archived;
    }
    let kinds = [
        sum.available,
        sum.running,
        sum.completed,
        sum.dead,
        sum.archived,
    ];
    assert!(kinds.iter().filter(|&&n| n > 0).count() >= 3, "{sum:?}");
}
