//! The worker runtime on every backend: typed handlers and every outcome, concurrency, heartbeats,
//! timeouts, cancel requests, progress, graceful shutdown, transactional completion, wake-ups,
//! fan-out with waiting producers, periodic jobs, and the test helpers.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use backlog::{
    CancellationToken, Client, DrainMode, JobArgs, JobContext, JobState, MaintenanceConfig,
    Outcome, PeriodicJob, QueueName, QueueSettings, Schedule, StateFilter, Worker, WorkerBuilder,
};
use common::{Engine, TestDb};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Task {
    n: u32,
    action: String,
}

impl JobArgs for Task {
    const KIND: &'static str = "task";
    const QUEUE: &'static str = "work";
}

fn task(client: &Client, n: u32, action: &str) -> backlog::NewJob {
    client
        .job_for(&Task {
            n,
            action: action.into(),
        })
        .unwrap()
}

fn builder(db: &TestDb) -> WorkerBuilder {
    Worker::builder(db.client.clone()).configure(|c| {
        c.maintenance = None;
        c.poll_max = Duration::from_millis(100);
    })
}

/// Runs `worker` in a task of its own: cancel the token to stop it, await the handle for its report.
fn start(
    worker: &Worker,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<backlog::Result<backlog::RunReport>>,
) {
    let shutdown = CancellationToken::new();
    let (w, s) = (worker.clone(), shutdown.clone());
    (shutdown, tokio::spawn(async move { w.run(s).await }))
}

async fn job_state(client: &Client, id: i64) -> backlog::Job {
    client.job(id).await.unwrap()
}

/// Runs the worker `builder` makes until its queues are drained: its report.
async fn drain(builder: WorkerBuilder) -> backlog::RunReport {
    let worker = builder
        .configure(|w| w.drain = Some(DrainMode::All))
        .build()
        .unwrap();
    worker.run(CancellationToken::new()).await.unwrap()
}

/// Enqueues `n` jobs of `queue` (payloads 0 to n - 1) in one call: their ids.
async fn enqueue_numbered(client: &Client, queue: &str, n: u32) -> Vec<i64> {
    let jobs = (0..n).map(|i| client.new_job(queue, &i).unwrap()).collect();
    let outcomes = client.enqueue_many(jobs).await.unwrap();
    outcomes.iter().map(|o| o.id).collect()
}

async fn wait_until<F: AsyncFnMut() -> bool>(what: &str, limit: Duration, mut f: F) {
    let start = Instant::now();
    while !f().await {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Where a handler's outcome comes from: its first poll, made by the claim loop itself; a task
/// of its own after an `await` that was not ready; or a task from the start (no inline budget).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Path {
    Inline,
    AfterAwait,
    OwnTask,
}

async fn every_outcome(engine: Engine) {
    for path in [Path::Inline, Path::AfterAwait, Path::OwnTask] {
        every_outcome_by(engine, path).await;
    }
}

async fn every_outcome_by(engine: Engine, path: Path) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let mut s = QueueSettings::defaults(QueueName::new("work").unwrap());
    s.max_attempts = 2;
    s.backoff_base = Duration::from_millis(10);
    s.backoff_max = Duration::from_millis(20);
    c.queue_configure(&s).await.unwrap();
    let actions = [
        "complete",
        "result",
        "retry-once",
        "snooze-once",
        "discard",
        "cancel",
        "panic",
        "error",
    ];
    let ids: Vec<i64> = c
        .enqueue_many(
            actions
                .iter()
                .enumerate()
                .map(|(i, a)| task(c, i as u32, a))
                .collect(),
        )
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    // A snooze puts the attempt back, so the handler remembers that it snoozed once.
    let snoozed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = builder(&db)
        .queue("work", 3)
        .handler(move |ctx: JobContext, t: Task| {
            let snoozed = snoozed.clone();
            async move {
                if path == Path::AfterAwait {
                    tokio::task::yield_now().await;
                }
                Ok(match t.action.as_str() {
                    "complete" => Outcome::Complete,
                    "result" => Outcome::CompleteWith(serde_json::json!({"n": t.n})),
                    "retry-once" if ctx.attempt() == 1 => Outcome::Retry {
                        error: "again".into(),
                        after: Some(Duration::from_millis(5)),
                    },
                    "snooze-once" if !snoozed.swap(true, AtomicOrdering::SeqCst) => {
                        Outcome::Snooze(Duration::from_millis(5))
                    }
                    "discard" => Outcome::Discard("not worth it".into()),
                    "cancel" => Outcome::Cancel("changed my mind".into()),
                    "panic" => panic!("handler blew up"),
                    "error" => return Err("plain error".into()),
                    _ => Outcome::Complete,
                })
            }
        })
        .configure(|c| {
            if path == Path::OwnTask {
                c.inline_budget = Duration::ZERO;
            }
        });
    let report = drain(worker).await;
    let st = |i: usize| {
        let c = c.clone();
        let id = ids[i];
        async move { job_state(&c, id).await }
    };
    assert_eq!(st(0).await.state, JobState::Completed);
    let r = st(1).await;
    let result: serde_json::Value = serde_json::from_str(r.result.as_deref().unwrap()).unwrap();
    assert_eq!(
        (r.state, result),
        (JobState::Completed, serde_json::json!({"n": 1})),
        "{r:?}"
    );
    let r = st(2).await;
    assert_eq!(
        (r.state, r.attempt, r.errors[0].error.as_str()),
        (JobState::Completed, 2, "again")
    );
    let r = st(3).await;
    assert_eq!(
        (r.state, r.attempt, r.errors.len()),
        (JobState::Completed, 1, 0),
        "a snooze does not count: {r:?}"
    );
    let r = st(4).await;
    assert_eq!(
        (r.state, r.attempt, r.errors[0].error.as_str()),
        (JobState::Dead, 1, "not worth it")
    );
    assert_eq!(st(5).await.state, JobState::Cancelled);
    let r = st(6).await;
    assert_eq!((r.state, r.errors.len()), (JobState::Dead, 2));
    assert!(
        r.errors[0]
            .error
            .contains("handler panicked: handler blew up"),
        "{:?}",
        r.errors
    );
    let r = st(7).await;
    assert_eq!(
        (r.state, r.errors[1].error.as_str()),
        (JobState::Dead, "plain error")
    );
    assert_eq!(report.completed, 4, "{path:?}: {report:?}");
    db.drop_db().await;
}

/// A handler that panics when called, before it returns its future, fails its job like one that
/// panics while it runs; the worker goes on.
async fn handler_panicking_when_called(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let ids: Vec<i64> = c
        .enqueue_many(vec![task(c, 0, "complete"), {
            let mut j = task(c, 1, "complete");
            j.kind = Some(backlog::Kind::new("boom").unwrap());
            j.max_attempts = Some(1);
            j
        }])
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    let worker = builder(&db)
        .queue("work", 2)
        .handler(|_ctx: JobContext, _t: Task| async { Ok(Outcome::Complete) })
        .raw_handler("boom", |_ctx: JobContext| {
            if _ctx.attempt() > 0 {
                panic!("no future for you");
            }
            async { Ok(Outcome::Complete) }
        });
    let report = drain(worker).await;
    assert_eq!((report.completed, report.failed), (1, 1), "{report:?}");
    let r = job_state(c, ids[1]).await;
    assert!(
        r.errors[0]
            .error
            .contains("handler panicked: no future for you"),
        "{r:?}"
    );
    db.drop_db().await;
}

/// Handlers that end at once run in their claim loop's task; a handler's first poll that takes
/// longer than the inline budget sends the rest of its claim to tasks of their own; with no
/// budget every job has its own task. Told apart by the task id each handler sees.
async fn handlers_run_inline_within_a_budget(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    // (inline budget, sync work in each handler's first poll, jobs, the most jobs that may
    // share a task with others). The first case's budget is far above what 60 empty polls take,
    // so that a thread preempted on a loaded machine does not split the claim.
    let cases = [
        (Duration::from_millis(100), Duration::ZERO, 60, 60),
        (Duration::ZERO, Duration::ZERO, 20, 1),
        (Duration::from_millis(1), Duration::from_millis(5), 10, 1),
    ];
    for (budget, work, jobs, most_shared) in cases {
        c.enqueue_many((0..jobs).map(|n| task(c, n, "complete")).collect())
            .await
            .unwrap();
        let tasks = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
        let seen = tasks.clone();
        let worker = builder(&db)
            // One claim loop claiming every job at once: one claim per case.
            .queue("work", jobs as usize)
            .handler(move |_ctx: JobContext, _t: Task| {
                let seen = seen.clone();
                async move {
                    std::thread::sleep(work);
                    let id = tokio::task::try_id().expect("a task");
                    *seen.lock().unwrap().entry(id).or_insert(0usize) += 1;
                    Ok(Outcome::Complete)
                }
            })
            .configure(|w| {
                w.fetchers = Some(1);
                w.inline_budget = budget;
            });
        let report = drain(worker).await;
        assert_eq!(report.completed, jobs as u64);
        let tasks = tasks.lock().unwrap();
        let shared = *tasks.values().max().unwrap();
        assert!(
            shared <= most_shared && (most_shared == 1 || shared == most_shared),
            "budget {budget:?}, work {work:?}: jobs per task {tasks:?}"
        );
    }
    db.drop_db().await;
}

async fn concurrency_and_unknown_kinds(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    c.enqueue_many((0..24).map(|n| task(c, n, "sleep")).collect())
        .await
        .unwrap();
    // A job of a kind this worker has no handler for is not claimed by it.
    let mut other = c.new_job("work", &1).unwrap();
    other.kind = Some(backlog::Kind::new("other").unwrap());
    let other = c.enqueue(other).await.unwrap().id;
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let worker = builder(&db)
        .queue("work", 3)
        .handler(move |_ctx: JobContext, _t: Task| {
            let (r, p) = (r.clone(), p.clone());
            async move {
                let now = r.fetch_add(1, AtomicOrdering::SeqCst) + 1;
                p.fetch_max(now, AtomicOrdering::SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                r.fetch_sub(1, AtomicOrdering::SeqCst);
                Ok(Outcome::Complete)
            }
        })
        .build()
        .unwrap();
    let (shutdown, run) = start(&worker);
    let cl = c.clone();
    wait_until("24 completions", Duration::from_secs(30), async || {
        cl.stats(Some(&QueueName::new("work").unwrap()))
            .await
            .unwrap()[0]
            .1
            .completed
            == 24
    })
    .await;
    shutdown.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(
        peak.load(AtomicOrdering::SeqCst),
        3,
        "concurrency 3 was not used or was exceeded"
    );
    assert_eq!(job_state(c, other).await.state, JobState::Available);
    db.drop_db().await;
}

async fn heartbeats_timeouts_and_cancel_requests(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let long = c.enqueue(task(c, 1, "long")).await.unwrap().id;
    let hang = c.enqueue(task(c, 2, "hang")).await.unwrap().id;
    let cancel_me = c.enqueue(task(c, 3, "until-cancelled")).await.unwrap().id;
    let worker = builder(&db)
        .queue("work", 3)
        .handler(|ctx: JobContext, t: Task| async move {
            match t.action.as_str() {
                // Outlives its 1s lease two and a half times over: heartbeats keep it.
                "long" => {
                    ctx.progress(&serde_json::json!({"step": 1})).await?;
                    tokio::time::sleep(Duration::from_millis(2500)).await;
                    Ok(Outcome::Complete)
                }
                "hang" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(Outcome::Complete)
                }
                // Notices the stop and fails: a requested cancel wins over a retry.
                _ => {
                    ctx.stopped().await;
                    Err("interrupted".into())
                }
            }
        })
        .configure(|cfg| {
            cfg.lease = Some(Duration::from_secs(1));
            cfg.job_timeout = Some(Duration::from_secs(4));
        })
        .build()
        .unwrap();
    let (shutdown, run) = start(&worker);
    // Another process (another client) keeps claiming, which rescues expired leases.
    let other = Arc::new(Client::connect(&db.url).await.unwrap());
    let o = other.clone();
    let rescuing = CancellationToken::new();
    let r = rescuing.clone();
    let rescuer = tokio::spawn(async move {
        while !r.is_cancelled() {
            let _ = o.rescue().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let cl = c.clone();
    wait_until("progress", Duration::from_secs(10), async || {
        job_state(&cl, long).await.progress.is_some()
    })
    .await;
    let progress = job_state(c, long).await.progress.unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&progress).unwrap(),
        serde_json::json!({"step": 1})
    );
    wait_until(
        "the cancellable job to run",
        Duration::from_secs(10),
        async || job_state(&cl, cancel_me).await.state == JobState::Running,
    )
    .await;
    let j = other.cancel(cancel_me).await.unwrap();
    assert_eq!(
        (j.state, j.cancel_requested_at.is_some()),
        (JobState::Running, true)
    );
    wait_until("all three to end", Duration::from_secs(20), async || {
        let (a, b, d) = (
            job_state(&cl, long).await,
            job_state(&cl, hang).await,
            job_state(&cl, cancel_me).await,
        );
        a.state == JobState::Completed
            && b.state != JobState::Running
            && d.state == JobState::Cancelled
    })
    .await;
    rescuing.cancel();
    rescuer.await.unwrap();
    shutdown.cancel();
    run.await.unwrap().unwrap();
    let long_job = job_state(c, long).await;
    assert_eq!(
        (long_job.attempt, long_job.errors.len()),
        (1, 0),
        "the lease of a heartbeating job expired: {long_job:?}"
    );
    let hung = job_state(c, hang).await;
    assert!(
        hung.errors[0].error.contains("timed out after 4s"),
        "{:?}",
        hung.errors
    );
    assert_eq!(
        job_state(c, cancel_me).await.errors[0].error,
        "cancelled on request"
    );
    other.close().await;
    db.drop_db().await;
}

async fn graceful_shutdown_releases_late_jobs(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let quick = c.enqueue(task(c, 1, "quick")).await.unwrap().id;
    let slow = c.enqueue(task(c, 2, "slow")).await.unwrap().id;
    let worker = builder(&db)
        .queue("work", 2)
        .handler(|_ctx: JobContext, t: Task| async move {
            let d = if t.action == "quick" { 300 } else { 60_000 };
            tokio::time::sleep(Duration::from_millis(d)).await;
            Ok(Outcome::Complete)
        })
        .configure(|cfg| cfg.grace = Duration::from_millis(800))
        .build()
        .unwrap();
    let (shutdown, run) = start(&worker);
    let cl = c.clone();
    wait_until("both running", Duration::from_secs(10), async || {
        cl.stats(Some(&QueueName::new("work").unwrap()))
            .await
            .unwrap()[0]
            .1
            .running
            == 2
    })
    .await;
    shutdown.cancel();
    let started = Instant::now();
    let report = run.await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!((report.completed, report.released), (1, 1), "{report:?}");
    assert_eq!(job_state(c, quick).await.state, JobState::Completed);
    let s = job_state(c, slow).await;
    assert_eq!(
        (s.state, s.attempt, s.lease_token),
        (JobState::Available, 0, None)
    );
    db.drop_db().await;
}

/// A stop is honoured while the queue stays full: quick handlers end in their first poll, their
/// slots come straight back, and the claim loops never wait; they must still stop at once, leave
/// the rest of the queue alone, and complete every job they ran.
async fn stop_under_a_full_queue(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let total = 5_000u32;
    for chunk in (0..total).collect::<Vec<_>>().chunks(1_000) {
        c.enqueue_many(chunk.iter().map(|&n| task(c, n, "complete")).collect())
            .await
            .unwrap();
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let worker = builder(&db)
        .queue("work", 20)
        .handler(move |_ctx: JobContext, _t: Task| {
            r.fetch_add(1, AtomicOrdering::Relaxed);
            async { Ok(Outcome::Complete) }
        })
        .build()
        .unwrap();
    let (shutdown, run) = start(&worker);
    let seen = ran.clone();
    wait_until("200 jobs run", Duration::from_secs(30), async || {
        seen.load(AtomicOrdering::Relaxed) >= 200
    })
    .await;
    shutdown.cancel();
    let report = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the worker stops while its queue is still full")
        .unwrap()
        .unwrap();
    let ran = ran.load(AtomicOrdering::Relaxed) as u64;
    assert_eq!((report.completed, report.lost), (ran, 0), "{report:?}");
    let left = c
        .stats(Some(&QueueName::new("work").unwrap()))
        .await
        .unwrap()[0]
        .1
        .clone();
    assert_eq!(left.running, 0, "{left:?}");
    assert_eq!(left.available as u64, total as u64 - ran, "{left:?}");
    assert!(
        ran < total as u64 / 2,
        "stopped early: {ran} of {total} ran"
    );
    db.drop_db().await;
}

async fn transactional_completion(engine: Engine) {
    let db = TestDb::new(engine).await;
    db.create_results().await;
    let c = &db.client;
    c.enqueue_many((0..50).map(|n| task(c, n, "tx")).collect())
        .await
        .unwrap();
    let worker = builder(&db)
        .queue("work", 4)
        .handler(|ctx: JobContext, _t: Task| async move {
            let mut tx = ctx.begin().await?;
            common::insert_result(&mut tx, ctx.id()).await?;
            Ok(Outcome::CompleteInTx(tx))
        })
        .build()
        .unwrap();
    let report = worker.drain().await.unwrap();
    assert_eq!(report.completed, 50);
    assert_eq!(db.scalar("SELECT COUNT(*) FROM results").await, 50);
    assert_eq!(
        db.scalar("SELECT COUNT(DISTINCT job_id) FROM results")
            .await,
        50
    );
    // Enqueue inside the caller's own transaction: the job exists only if it commits.
    let mut tx = c.begin().await.unwrap();
    let gone = tx.enqueue(vec![task(c, 99, "x")], c.now()).await.unwrap()[0].id;
    tx.rollback().await.unwrap();
    assert!(matches!(
        c.job(gone).await,
        Err(backlog::Error::JobNotFound { .. })
    ));
    db.drop_db().await;
}

async fn wake_ups_and_fan_out(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    c.subscribe("orders", "billing").await.unwrap();
    c.subscribe("orders", "shipping").await.unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    let worker = Worker::builder(c.clone())
        .queue("billing", 2)
        .queue("shipping", 2)
        .fallback_handler(move |ctx: JobContext| {
            let s2 = s2.clone();
            async move {
                s2.fetch_add(1, AtomicOrdering::SeqCst);
                Ok(Outcome::CompleteWith(
                    serde_json::json!({"handled_in": ctx.job().queue}),
                ))
            }
        })
        .configure(|cfg| {
            cfg.maintenance = None;
            cfg.poll_max = Duration::from_secs(30); // only a wake-up can make this fast
        })
        .build()
        .unwrap();
    let (shutdown, run) = start(&worker);
    tokio::time::sleep(Duration::from_millis(300)).await; // let the fetchers go idle
    let started = Instant::now();
    let copies = c
        .publish(
            "orders",
            c.new_job("orders", &serde_json::json!({"order": 7}))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(copies.len(), 2);
    for out in &copies {
        let job = c
            .wait_for(out.id, Duration::from_secs(10))
            .await
            .unwrap()
            .expect("kept");
        assert_eq!(job.state, JobState::Completed);
        assert!(job.result.unwrap().contains(&job.queue));
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an in-process enqueue did not wake the workers"
    );
    assert_eq!(seen.load(AtomicOrdering::SeqCst), 2);
    // Waiting has a timeout.
    let mut later = c.new_job("billing", &1).unwrap();
    later.run_at = Some(c.now() + 3_600_000_000);
    let later = c.enqueue(later).await.unwrap().id;
    let e = c
        .wait_for(later, Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(matches!(e, backlog::Error::WaitTimeout { .. }), "{e}");
    if engine == Engine::Postgres {
        // A plain INSERT from another connection wakes the workers through LISTEN/NOTIFY.
        let started = Instant::now();
        db.exec(
            "INSERT INTO backlog_job (queue, payload) VALUES ('shipping', '{\"plain\": true}')",
        )
        .await;
        let cl = c.clone();
        wait_until("the plain-SQL job", Duration::from_secs(10), async || {
            seen.load(AtomicOrdering::SeqCst) == 3
        })
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "NOTIFY did not wake the worker"
        );
        drop(cl);
    }
    shutdown.cancel();
    run.await.unwrap().unwrap();
    db.drop_db().await;
}

async fn periodic_jobs_fire_once_per_tick(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let maint = MaintenanceConfig {
        leader_ttl: Duration::from_millis(1500),
        renew_every: Duration::from_millis(100),
        rescue_every: Duration::from_millis(100),
        ..MaintenanceConfig::default()
    };
    let tick = c
        .new_job("ticks", &serde_json::json!({"tick": true}))
        .unwrap();
    let mut runs = vec![];
    let shutdown = CancellationToken::new();
    // Three worker "processes" compete; only the leader fires, and each tick fires once.
    for i in 0..3 {
        let w = Worker::builder(c.clone())
            .queue("unused", 1)
            .fallback_handler(|_ctx: JobContext| async { Ok(Outcome::Complete) })
            .periodic(PeriodicJob::new(
                "every-300ms",
                Schedule::Every(Duration::from_millis(300)),
                tick.clone(),
            ))
            .configure(|cfg| {
                cfg.owner = format!("proc-{i}");
                cfg.maintenance = Some(maint.clone());
            })
            .build()
            .unwrap();
        let s = shutdown.clone();
        runs.push(tokio::spawn(async move { w.run(s).await }));
    }
    // Wait for ticks rather than sleep a fixed time: under a loaded CI machine the leader may
    // be elected late, and a lower bound on a fixed window was a flake.
    let started = Instant::now();
    wait_until("five ticks", Duration::from_secs(30), async || {
        backlog::testing::jobs_in(c, "ticks", None)
            .await
            .unwrap()
            .len()
            >= 5
    })
    .await;
    shutdown.cancel();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    let window = started.elapsed();
    let jobs = backlog::testing::jobs_in(c, "ticks", None).await.unwrap();
    let mut run_ats: Vec<i64> = jobs.iter().map(|j| j.run_at).collect();
    run_ats.sort_unstable();
    let n = run_ats.len();
    run_ats.dedup();
    assert_eq!(run_ats.len(), n, "a tick fired twice");
    // At most one tick per interval that passed, plus the one due when the leader started.
    let most = window.as_millis() / 300 + 2;
    assert!(
        n as u128 <= most,
        "{n} ticks in {window:?} at one per 300ms (at most {most})"
    );
    assert!(
        run_ats.iter().all(|t| t % 300_000 == 0),
        "ticks are multiples of the interval"
    );
    // The leader declared the schedule: what it is, its queue, its last tick (the newest job's)
    // and the next one.
    let declared = c.cron_schedules().await.unwrap();
    assert_eq!(declared.len(), 1, "{declared:?}");
    let d = &declared[0];
    assert_eq!(
        (d.name.as_str(), d.schedule.as_deref(), d.queue.as_deref()),
        ("every-300ms", Some("every 300ms"), Some("ticks"))
    );
    assert_eq!(d.last_tick, *run_ats.last().unwrap());
    let next = d.next_tick.expect("a next tick");
    // (Declared again just after each fire: a stop in between leaves the one before it.)
    assert!(next >= d.last_tick && next % 300_000 == 0, "{d:?}");
    assert!(Schedule::cron("not a cron").is_err());
    let nightly = Schedule::cron("0 3 * * *").unwrap();
    let t = nightly.last_tick(1_700_000_000_000_000).unwrap();
    assert_eq!(t % (24 * 3600 * 1_000_000), 3 * 3600 * 1_000_000);
    assert_eq!(nightly.next_tick(t), Some(t + 24 * 3600 * 1_000_000));
    assert_eq!(nightly.describe(), "0 3 * * *");
    db.drop_db().await;
}

async fn test_helpers(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    c.enqueue(task(c, 5, "complete")).await.unwrap();
    backlog::testing::assert_enqueued(
        c,
        &Task {
            n: 5,
            action: "complete".into(),
        },
    )
    .await;
    let worker = builder(&db)
        .queue("work", 1)
        .handler(|_ctx: JobContext, t: Task| async move {
            if t.action == "fail" {
                return Err("nope".into());
            }
            Ok(Outcome::CompleteWith(serde_json::json!(t.n * 2)))
        })
        .build()
        .unwrap();
    let inline = backlog::testing::run_inline(
        &worker,
        &Task {
            n: 21,
            action: "x".into(),
        },
    )
    .await
    .unwrap();
    assert!(matches!(inline, Outcome::CompleteWith(v) if v == 42));
    assert!(
        backlog::testing::run_inline(
            &worker,
            &Task {
                n: 1,
                action: "fail".into()
            }
        )
        .await
        .is_err()
    );
    assert_eq!(worker.drain().await.unwrap().completed, 1);
    assert!(
        backlog::testing::enqueued::<Task>(c)
            .await
            .unwrap()
            .is_empty()
    );
    let done = backlog::testing::jobs_in(c, "work", Some(StateFilter::Stored(JobState::Completed)))
        .await
        .unwrap();
    assert_eq!(done[0].result.as_deref(), Some("10"));
    db.drop_db().await;
}

/// The leader prunes finished jobs in bounded batches per each queue's retention: `keep` queues
/// lose completed, cancelled and (when configured) dead jobs past their age; `archive` queues move
/// them to the archive, where they can still be read.
async fn leader_prunes_per_retention(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let mut archive = QueueSettings::defaults(QueueName::new("archived").unwrap());
    archive.retention = backlog::Retention::Archive;
    c.queue_configure(&archive).await.unwrap();
    let kept = enqueue_numbered(c, "kept", 23).await;
    let arch = c
        .enqueue(c.new_job("archived", &1).unwrap())
        .await
        .unwrap()
        .id;
    let fresh = c
        .enqueue(c.new_job("kept", &"fresh").unwrap())
        .await
        .unwrap()
        .id;
    let cancelled = c.cancel(arch).await.unwrap();
    assert_eq!(cancelled.state, JobState::Cancelled);
    let worker = builder(&db)
        .queue("kept", 4)
        .fallback_handler(|ctx: JobContext| async move {
            if ctx.job().payload.contains("fresh") {
                tokio::time::sleep(Duration::from_millis(1500)).await;
            }
            Ok(Outcome::Complete)
        })
        .configure(|cfg| {
            cfg.maintenance = Some(MaintenanceConfig {
                leader_ttl: Duration::from_secs(2),
                renew_every: Duration::from_millis(100),
                prune_every: Duration::from_millis(100),
                keep_completed: Duration::from_secs(1),
                keep_cancelled: Duration::ZERO,
                prune_batch: 5, // 23 jobs: five batches in one pass
                ..MaintenanceConfig::default()
            })
        })
        .build()
        .unwrap();
    let (shutdown, run) = start(&worker);
    let cl = c.clone();
    wait_until(
        "the first 23 to be pruned",
        Duration::from_secs(20),
        async || {
            matches!(
                cl.job(kept[22]).await,
                Err(backlog::Error::JobNotFound { .. })
            )
        },
    )
    .await;
    // The job that finishes last is kept as completed until it is older than keep_completed.
    wait_until(
        "the slow job to be seen completed",
        Duration::from_secs(20),
        async || job_state(&cl, fresh).await.state == JobState::Completed,
    )
    .await;
    shutdown.cancel();
    run.await.unwrap().unwrap();
    for id in &kept {
        assert!(matches!(
            c.job(*id).await,
            Err(backlog::Error::JobNotFound { .. })
        ));
    }
    assert_eq!(db.scalar("SELECT COUNT(*) FROM backlog_job_all").await, 1);
    // The cancelled job of the archive queue moved to the archive and is still readable.
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM backlog_job_archive").await,
        1
    );
    assert_eq!(job_state(c, arch).await.state, JobState::Cancelled);
    db.drop_db().await;
}

/// A claim takes at most `MANY_CLAIMERS_CLAIM_MAX` jobs on PostgreSQL, `DEFAULT_CLAIM_MAX` on
/// SQLite (one writer) and `FEW_CLAIMERS_CLAIM_MAX` on MySQL and MariaDB (whose claimers slow
/// each other down) unless `claim_batch` says otherwise, however many slots are free (jobs of
/// one claim share its lease token).
async fn claims_are_capped(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let caps = c.backend().capabilities();
    let cap = match (caps.few_claimers, caps.single_writer) {
        (true, _) => 400.min(backlog::FEW_CLAIMERS_CLAIM_MAX),
        (false, true) => backlog::DEFAULT_CLAIM_MAX,
        (false, false) => backlog::MANY_CLAIMERS_CLAIM_MAX,
    };
    assert_eq!(
        caps.few_claimers,
        matches!(engine, Engine::MySql | Engine::Galera)
    );
    for (claim_batch, expected) in [(None, cap), (Some(150), 150)] {
        c.enqueue_many((0..400).map(|n| task(c, n, "complete")).collect())
            .await
            .unwrap();
        let per_claim = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
        let seen = per_claim.clone();
        let worker = builder(&db)
            .queue("work", 400)
            .handler(move |ctx: JobContext, _t: Task| {
                *seen
                    .lock()
                    .unwrap()
                    .entry(ctx.job().lease_token)
                    .or_insert(0usize) += 1;
                async { Ok(Outcome::Complete) }
            })
            .configure(|w| {
                w.claim_batch = claim_batch;
                // One loop: its first claim sees all 400 slots free. With several, a loop may
                // claim while the others hold some of the slots and take fewer than the cap.
                w.fetchers = Some(1);
            });
        let report = drain(worker).await;
        assert_eq!(report.completed, 400);
        let sizes = per_claim.lock().unwrap();
        assert_eq!(sizes.values().sum::<usize>(), 400);
        // The first claim finds 400 jobs and 400 free slots: it takes the most allowed.
        assert_eq!(*sizes.values().max().unwrap(), expected, "{sizes:?}");
    }
    db.drop_db().await;
}

/// Where the worker claims in transaction claim mode, a transaction claim whose loop's jobs all ended in their
/// first poll claims ahead of its free slots (up to the plan's `ahead`): a slot whose job ended
/// serves the next job. Jobs that do not end at once keep their slots, so the queue's
/// concurrency holds, and those a claim has no slot left for are left alone, free for a later
/// claim: every job runs once.
async fn claims_go_ahead_of_free_slots(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let caps = c.backend().capabilities();
    let tx_claims = caps.row_locks && caps.skip_locked && caps.bounded_tx_claims;
    // 600 jobs that end at once, then 12 that sleep, then 300 that end at once.
    let actions = (0..600).map(|_| "complete").chain((0..12).map(|_| "sleep"));
    let actions = actions.chain((0..300).map(|_| "complete"));
    let jobs = actions.enumerate().map(|(n, a)| task(c, n as u32, a));
    c.enqueue_many(jobs.collect()).await.unwrap();
    let runs = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let per_claim = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (seen, claims, r, p) = (
        runs.clone(),
        per_claim.clone(),
        running.clone(),
        peak.clone(),
    );
    let worker = builder(&db)
        .queue("work", 4)
        .handler(move |ctx: JobContext, t: Task| {
            *seen.lock().unwrap().entry(t.n).or_insert(0usize) += 1;
            let token = ctx.job().lease_token;
            *claims.lock().unwrap().entry(token).or_insert(0usize) += 1;
            let (r, p) = (r.clone(), p.clone());
            async move {
                let now = r.fetch_add(1, AtomicOrdering::SeqCst) + 1;
                p.fetch_max(now, AtomicOrdering::SeqCst);
                if t.action == "sleep" {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                r.fetch_sub(1, AtomicOrdering::SeqCst);
                Ok(Outcome::Complete)
            }
        })
        .configure(|w| w.fetchers = Some(1));
    let report = drain(worker).await;
    assert_eq!(report.completed, 912, "{report:?}");
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 912);
    assert!(runs.values().all(|&n| n == 1), "a job ran twice");
    assert!(
        peak.load(AtomicOrdering::SeqCst) <= 4,
        "concurrency 4 exceeded"
    );
    let largest = *per_claim.lock().unwrap().values().max().unwrap();
    match tx_claims {
        // Claims of up to 250 (PostgreSQL) or 500 (MySQL, MariaDB) once jobs ended at once;
        // lease claims (SQLite, Galera) take the free slots.
        true => assert!(largest > 100, "largest claim {largest}"),
        false => assert!(largest <= 4, "largest claim {largest}"),
    }
    let stats = c
        .stats(Some(&QueueName::new("work").unwrap()))
        .await
        .unwrap();
    assert_eq!(stats[0].1.completed, 912);
    // Jobs a claim left alone for want of a slot count as started once, by the claim that
    // starts them.
    let totals = c.totals().await.unwrap();
    let work = totals.iter().find(|r| r.queue == "work").unwrap();
    assert_eq!(work.counts.started, 912, "started");
    assert_eq!(
        work.counts.wait.iter().sum::<i64>(),
        912,
        "one wait per start"
    );
    db.drop_db().await;
}

/// A drain's counts are in backlog_stat when it returns (no maintenance, no periodic flush yet):
/// the history and /metrics see a short-lived worker's work.
async fn a_drain_leaves_its_counts(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    c.enqueue_many((0..30).map(|n| task(c, n, "complete")).collect())
        .await
        .unwrap();
    c.enqueue(task(c, 99, "discard")).await.unwrap();
    let report = drain(builder(&db).queue("work", 8).handler(
        |_ctx: JobContext, t: Task| async move {
            Ok(match t.action.as_str() {
                "discard" => Outcome::Discard("no".into()),
                _ => Outcome::Complete,
            })
        },
    ))
    .await;
    assert_eq!(report.completed, 30);
    let totals = c.totals().await.unwrap();
    let work = totals
        .iter()
        .find(|r| r.queue == "work")
        .expect("counts for work");
    let n = &work.counts;
    assert_eq!(
        (n.enqueued, n.started, n.completed, n.failed, n.dead),
        (31, 31, 30, 1, 1)
    );
    assert_eq!(n.wait.iter().sum::<i64>(), 31, "one wait per start");
    db.drop_db().await;
}

/// A handler's first statement about its own row, sent through its client: after
/// `JobContext::leased` it finds this attempt's lease, also when a transaction claim writes
/// that lease only at its commit (without it, PostgreSQL, MySQL and MariaDB alike read the row
/// as last committed, with no token, and the write is a lost lease).
async fn own_row_written_after_leased(engine: Engine) {
    let db = TestDb::new(engine).await;
    let c = &db.client;
    let ids = enqueue_numbered(c, "own", 24).await;
    let report = drain(builder(&db).queue("own", 8).fallback_handler(
        |ctx: JobContext| async move {
            ctx.leased().await;
            let result = serde_json::json!({ "id": ctx.id() });
            ctx.client()
                .set_result(ctx.job().job_ref(), &result)
                .await?;
            Ok(Outcome::Complete)
        },
    ))
    .await;
    assert_eq!(report.completed, 24, "{report:?}");
    for id in ids {
        let job = job_state(c, id).await;
        assert_eq!(job.state, JobState::Completed, "job {id}");
        assert_eq!(
            job.errors,
            vec![],
            "job {id}: its first attempt lost its lease"
        );
        let result: serde_json::Value = serde_json::from_str(&job.result.unwrap()).unwrap();
        assert_eq!(result, serde_json::json!({ "id": id }), "job {id}");
    }
    db.drop_db().await;
}

// On the Galera cluster too (`scripts/galera.sh`), each test's clients listing the nodes from a
// random one on.
backlog_testdb::on_every_backend_and_galera!(
    every_outcome,
    handlers_run_inline_within_a_budget,
    handler_panicking_when_called,
    concurrency_and_unknown_kinds,
    claims_are_capped,
    claims_go_ahead_of_free_slots,
    heartbeats_timeouts_and_cancel_requests,
    graceful_shutdown_releases_late_jobs,
    stop_under_a_full_queue,
    transactional_completion,
    wake_ups_and_fan_out,
    periodic_jobs_fire_once_per_tick,
    test_helpers,
    leader_prunes_per_retention,
    a_drain_leaves_its_counts,
    own_row_written_after_leased,
);
