//! Network faults between a worker and its database, through a TCP proxy on loopback
//! (`backlog_testdb::proxy`), on PostgreSQL and MariaDB: added latency, a partition (the
//! connection stalls, no FIN, no data) longer than the lease after which the worker comes back
//! late, and a stall that never ends. Nothing is lost or done twice, a late completion changes
//! nothing, and nothing waits forever: connects and calls end at their timeouts.
#![cfg(feature = "servers")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backlog::{
    BackendConfig, CancellationToken, Client, DbErrorKind, DrainMode, Error, JobContext, JobState,
    MaintenanceConfig, Outcome, Worker,
};
use common::proxy::Proxy;
use common::{Engine, TestDb};
use tokio::sync::Notify;

fn config(statement_timeout: Duration) -> BackendConfig {
    BackendConfig {
        acquire_timeout: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(1),
        statement_timeout: Some(statement_timeout),
        ..BackendConfig::default()
    }
}

/// A worker whose jobs each write one results row and complete in that same commit.
fn transactional(client: Client, concurrency: usize, lease: Duration) -> backlog::WorkerBuilder {
    Worker::builder(client)
        .queue("net", concurrency)
        .fallback_handler(|ctx: JobContext| async move {
            let mut tx = ctx.begin().await?;
            common::insert_result(&mut tx, ctx.id()).await?;
            Ok(Outcome::CompleteInTx(tx))
        })
        .configure(move |c| {
            c.lease = Some(lease);
            c.poll_max = Duration::from_millis(100);
            c.maintenance = None;
        })
}

/// Another process with maintenance that rescues every 200 ms, and completes jobs like the
/// worker under test.
fn rescuer(client: Client, drain: bool) -> Worker {
    transactional(client, 4, Duration::from_secs(5))
        .configure(move |c| {
            c.maintenance = Some(MaintenanceConfig {
                rescue_every: Duration::from_millis(200),
                ..MaintenanceConfig::default()
            });
            c.drain = drain.then_some(DrainMode::All);
        })
        .build()
        .unwrap()
}

/// The call failed with the transient "no answer within the deadline".
fn assert_no_answer(err: &Error) {
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DbErrorKind::NoAnswer,
                ..
            }
        ),
        "{err}"
    );
}

async fn wait_until<F: AsyncFn() -> bool>(what: &str, limit: Duration, done: F) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// 5 ms each way on every packet: a worker drains 300 transactional jobs, each once.
async fn latency(engine: Engine) {
    let db = TestDb::new(engine).await;
    db.create_results().await;
    let proxy = Proxy::for_url(&db.url).await;
    proxy.set_latency(Duration::from_millis(5));
    db.enqueue_numbered("net", 300).await;
    let client = Client::connect_with(&proxy.url(&db.url), &config(Duration::from_secs(10)))
        .await
        .unwrap();
    let started = Instant::now();
    let report = transactional(client, 8, Duration::from_secs(5))
        .configure(|c| c.drain = Some(DrainMode::All))
        .build()
        .unwrap()
        .run(CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(report.completed, 300, "{report:?}");
    db.assert_each_done_once("net", 300).await;
    eprintln!(
        "{engine:?}: 300 jobs through 10 ms of added round trip in {:.2?}",
        started.elapsed()
    );
    db.drop_db().await;
}

/// A worker is cut off from the database (its connections stall: no data, no FIN) while it runs
/// a job, for longer than the job's lease. Another process rescues the job and completes it.
/// When the partition heals, what the first worker sent is delivered late: its transaction's
/// write and its completion, fenced by the old lease token, change nothing. The job is
/// completed once, by the second worker, with one results row.
async fn a_partitioned_worker_comes_back_late(engine: Engine) {
    comes_back_late(engine, false).await
}

/// The same partition with the worker claiming in transaction claim mode, cut off in its job's
/// first poll (the handler stalls the proxy), before the commit that would lease the job: its
/// transaction still holds the row lock on the server, which ends the silent session after the
/// lease (PostgreSQL's idle-in-transaction timeout, MySQL's wait_timeout) and so frees the job
/// for the other process. The cut-off worker's commit fails when the partition heals, and it
/// drops the handler it had started: the job is completed once, by the other process, as its
/// first counted attempt. Where the runtime claims under a lease instead (a Galera cluster),
/// this is the lease-mode test again.
async fn a_worker_cut_off_mid_claim_holds_its_job_no_longer_than_a_lease(engine: Engine) {
    comes_back_late(engine, true).await
}

async fn comes_back_late(engine: Engine, claim_in_transaction: bool) {
    let db = TestDb::new(engine).await;
    db.create_results().await;
    let proxy = Arc::new(Proxy::for_url(&db.url).await);
    // Calls wait out the partition (20 s > the 10 s limit below): what they send is delivered
    // when it heals, which is the late completion this test is about.
    let cut_off = Client::connect_with(&proxy.url(&db.url), &config(Duration::from_secs(20)))
        .await
        .unwrap();
    let (started, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let ran = Arc::new(AtomicUsize::new(0));
    let worker = Worker::builder(cut_off)
        .queue("net", 1)
        .fallback_handler({
            let (started, go, ran, proxy) =
                (started.clone(), go.clone(), ran.clone(), proxy.clone());
            move |ctx: JobContext| {
                let (started, go, ran, proxy) =
                    (started.clone(), go.clone(), ran.clone(), proxy.clone());
                async move {
                    ran.fetch_add(1, Ordering::SeqCst);
                    // The partition begins in the handler's first poll: before the commit that
                    // leases the job in transaction claim mode, whatever the scheduler does
                    // next (stalled from the test's task, it raced that commit under load).
                    proxy.stall();
                    started.notify_one();
                    go.notified().await;
                    let mut tx = ctx.begin().await?;
                    common::insert_result(&mut tx, ctx.id()).await?;
                    Ok(Outcome::CompleteInTx(tx))
                }
            }
        })
        .configure(move |c| {
            c.lease = Some(Duration::from_secs(1));
            c.maintenance = None;
            c.drain = Some(DrainMode::All);
            c.poll_max = Duration::from_millis(100);
            c.claim_in_transaction = claim_in_transaction;
        })
        .build()
        .unwrap();
    db.enqueue_numbered("net", 1).await;
    let held_in_tx = claim_in_transaction && db.client.backend().capabilities().bounded_tx_claims;
    let first = tokio::spawn(async move { worker.run(CancellationToken::new()).await });
    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the job starts");
    // Its transaction and completion are sent into the partition.
    go.notify_one();

    let other = Client::connect(&db.url).await.unwrap();
    let stop = CancellationToken::new();
    let rescuing = tokio::spawn({
        let (worker, stop) = (rescuer(other, false), stop.clone());
        async move { worker.run(stop).await }
    });
    let id = db.client.jobs(None, None, 0, 1).await.unwrap()[0].id;
    wait_until(
        "the job rescued and completed",
        Duration::from_secs(10),
        async || db.client.job(id).await.unwrap().state == JobState::Completed,
    )
    .await;
    proxy.heal();

    let report = tokio::time::timeout(Duration::from_secs(30), first)
        .await
        .expect("the cut-off worker ends once it hears back")
        .unwrap()
        .unwrap();
    stop.cancel();
    let second = rescuing.await.unwrap().unwrap();
    assert_eq!(second.completed, 1, "{second:?}");
    assert_eq!(
        (report.completed, ran.load(Ordering::SeqCst)),
        (0, 1),
        "{report:?}"
    );
    // Under a lease the cut-off worker's attempt counted; in a transaction it was never
    // committed.
    let attempts = if held_in_tx { 1 } else { 2 };
    let job = db.client.job(id).await.unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Completed, attempts));
    db.assert_each_done_once("net", 1).await;
    db.drop_db().await;
}

/// The database goes silent for good under a running worker: connects and calls end at their
/// timeouts with a transient "no answer" error, the worker shuts down within its grace period
/// plus a timeout, and another process finishes its jobs, each once.
async fn a_stall_never_hangs(engine: Engine) {
    let db = TestDb::new(engine).await;
    db.create_results().await;
    let proxy = Proxy::for_url(&db.url).await;
    let url = proxy.url(&db.url);
    let limit = Duration::from_secs(1);
    let client = Client::connect_with(&url, &config(limit)).await.unwrap();
    // Its pool waits longer for a connection than a call may take: the call's own deadline ends
    // it (an idle connection is pinged before use, and that ping stalls too).
    let probe_config = BackendConfig {
        acquire_timeout: limit * 5,
        ..config(limit)
    };
    let probe = Client::connect_with(&url, &probe_config).await.unwrap();
    db.enqueue_numbered("net", 200).await;
    let worker = transactional(client, 4, Duration::from_secs(2))
        .configure(|c| {
            c.grace = Duration::from_secs(1);
            c.job_timeout = Some(Duration::from_secs(2));
        })
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.run(shutdown).await }
    });
    wait_until("some jobs done", Duration::from_secs(10), async || {
        db.scalar("SELECT COUNT(*) FROM results").await >= 20
    })
    .await;
    proxy.stall();

    // A call and a new connection each end at their timeouts.
    let asked = Instant::now();
    let err = probe.stats(None).await.unwrap_err();
    assert_no_answer(&err);
    assert!(err.is_transient());
    assert!(asked.elapsed() < limit * 3, "{:?}", asked.elapsed());
    let asked = Instant::now();
    let refused = Client::connect_with(&url, &config(limit))
        .await
        .unwrap_err();
    assert!(refused.is_transient(), "{refused}");
    assert!(asked.elapsed() < limit * 4, "{:?}", asked.elapsed());

    // Shutdown: running jobs get the grace period, their releases a timeout each.
    let asked = Instant::now();
    shutdown.cancel();
    let report = tokio::time::timeout(Duration::from_secs(15), running)
        .await
        .expect("the worker shuts down while the database is silent")
        .unwrap();
    eprintln!(
        "{engine:?}: shut down in {:.2?} with the database silent: {report:?}",
        asked.elapsed()
    );

    // The partition ends. Until then a transaction the silent worker had begun stays open on
    // the server (which hears nothing either, and the proxy keeps the connection alive), and
    // the job rows it locked are skipped by rescues: see RELIABILITY.md for the server-side
    // timeouts that end such a transaction when a partition lasts. Once it heals, what was
    // held back is delivered and each such transaction commits or rolls back.
    proxy.heal();
    // Another process finishes the rest; the silent worker's jobs come back by rescue.
    let finisher = rescuer(Client::connect(&db.url).await.unwrap(), true);
    let finished = finisher.run(CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(30), finished)
        .await
        .expect("the rest is drained")
        .unwrap();
    db.assert_each_done_once("net", 200).await;
    drop(proxy);
    db.drop_db().await;
}

/// A `BEGIN` sent just before the network stalls times out (its call fails with "no answer"),
/// and its answer arrives once the stall heals. The connection it was sent on must never serve
/// another call with that transaction open on the server: claims and completions reported as
/// done would run inside it, invisible to every other session, and the next `ROLLBACK` on the
/// connection would undo them (as it did after a 40 s stall on PostgreSQL: two jobs completed
/// without error stayed `running` and ran again). The pool has one connection, so every call
/// after the stall gets the same one if it is kept.
async fn a_begin_answered_late_leaves_no_transaction_open(engine: Engine) {
    let db = TestDb::new(engine).await;
    // One server (one node of a Galera cluster), through the proxy.
    let proxy = Proxy::for_url(db.direct()).await;
    let limit = Duration::from_millis(500);
    let one = BackendConfig {
        max_connections: 1,
        acquire_timeout: Duration::from_secs(10),
        ..config(limit)
    };
    let client = Client::connect_with(&proxy.url(db.direct()), &one)
        .await
        .unwrap();
    let payload = serde_json::json!({"n": 0});
    for _ in 0..2 {
        let job = client.new_job("late", &payload).unwrap();
        client.enqueue(job).await.unwrap();
    }
    // The connection back in the pool (sqlx pings it on release), so the stall meets the BEGIN.
    while common::idle_connections(&client) < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.stall();
    let err = client.begin().await.map(|_| ()).unwrap_err();
    assert_no_answer(&err);
    // Longer than the deadline, so the BEGIN is answered well after its call gave up.
    tokio::time::sleep(limit * 3).await;
    proxy.heal();

    // Every acknowledged write is visible to every other session at once, and stays: an
    // enqueue; three claims and completions; then a transaction that rolls back (as a
    // transaction claim that found nothing does).
    let unfinished = "SELECT COUNT(*) FROM backlog_job WHERE queue = 'late' \
                      AND state IN ('available', 'running')";
    let job = client.new_job("late", &payload).unwrap();
    client.enqueue(job).await.unwrap();
    assert_eq!(db.scalar(unfinished).await, 3, "an enqueue is not visible");
    let opts = backlog::ClaimOpts::new("late").unwrap().limit(3);
    let claimed = client.claim(&opts).await.unwrap();
    assert_eq!(claimed.len(), 3);
    for job in &claimed {
        client.complete(job).await.unwrap();
    }
    assert_eq!(
        db.scalar(unfinished).await,
        0,
        "a completion is not visible"
    );
    client.begin().await.unwrap().rollback().await.unwrap();
    drop(client);
    drop(proxy);
    assert_eq!(db.scalar(unfinished).await, 0, "a completion was undone");
    db.drop_db().await;
}

/// Stalls of the whole network to the database (every connection of a worker and a producer
/// goes silent, no FIN), one after another, each longer than the last, the last longer than
/// the lease, while a producer enqueues at a steady pace and a worker with maintenance
/// completes each job in its handler's own transaction. Nothing acknowledged is lost, no job
/// is completed twice, and work resumes after each stall. Prints the figures RELIABILITY.md
/// reports ("Network stalls"): `BACKLOG_STALLS=5,40,90 BACKLOG_STALL_DEFAULTS=1` runs them at
/// the default timeouts and lease (30 s); CI runs 1, 3 and 7 s with a 2 s statement timeout and
/// a 4 s lease.
async fn stalls_lose_nothing_and_do_nothing_twice(engine: Engine) {
    let stalls: Vec<Duration> = std::env::var("BACKLOG_STALLS")
        .unwrap_or_else(|_| "1,3,7".into())
        .split(',')
        .map(|s| Duration::from_secs(s.trim().parse().expect("BACKLOG_STALLS: seconds")))
        .collect();
    let defaults = std::env::var_os("BACKLOG_STALL_DEFAULTS").is_some();
    let (backend, lease) = match defaults {
        true => (BackendConfig::default(), None),
        false => (config(Duration::from_secs(2)), Some(Duration::from_secs(4))),
    };
    let db = TestDb::new(engine).await;
    db.create_results().await;
    let proxy = Proxy::for_url(&db.url).await;
    let url = proxy.url(&db.url);
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let client = Client::connect_with(&url, &backend).await.unwrap();
    let worker = Worker::builder(client)
        .queue("net", 8)
        .fallback_handler(move |ctx: JobContext| {
            counted.fetch_add(1, Ordering::Relaxed);
            async move {
                let mut tx = ctx.begin().await?;
                common::insert_result(&mut tx, ctx.id()).await?;
                Ok(Outcome::CompleteInTx(tx))
            }
        })
        .configure(move |c| {
            c.lease = lease;
            c.maintenance = Some(MaintenanceConfig {
                rescue_every: Duration::from_millis(500),
                ..MaintenanceConfig::default()
            });
        })
        .build()
        .unwrap();
    let stop_worker = CancellationToken::new();
    let running = tokio::spawn({
        let stop = stop_worker.clone();
        async move { worker.run(stop).await }
    });

    // The producer: one job every 10 ms, each tried until acknowledged.
    let producer = Client::connect_with(&url, &backend).await.unwrap();
    let stop_producing = CancellationToken::new();
    let producing = tokio::spawn({
        let stop = stop_producing.clone();
        async move {
            let (mut acked, mut failed) = (vec![], 0u64);
            let mut n = 0i64;
            while !stop.is_cancelled() {
                let job = producer.new_job("net", &n).unwrap();
                match producer.enqueue(job).await {
                    Ok(o) => {
                        acked.push(o.id);
                        n += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(e) => {
                        assert!(e.is_transient(), "{e}");
                        failed += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            (acked, failed, n)
        }
    });

    let done = || db.scalar("SELECT COUNT(*) FROM results");
    wait_until("first jobs done", Duration::from_secs(20), async || {
        done().await >= 20
    })
    .await;
    let mut resumed = vec![];
    for &stall in &stalls {
        proxy.stall();
        tokio::time::sleep(stall).await;
        let before = done().await;
        proxy.heal();
        let healed = Instant::now();
        wait_until("work resumes", Duration::from_secs(120), async || {
            done().await > before
        })
        .await;
        resumed.push(healed.elapsed());
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    stop_producing.cancel();
    let (acked, failed, numbered) = producing.await.unwrap();
    let total = db
        .scalar("SELECT COUNT(*) FROM backlog_job_all WHERE queue = 'net'")
        .await;
    wait_until("every job done", Duration::from_secs(180), async || {
        done().await >= total
    })
    .await;
    stop_worker.cancel();
    running.await.unwrap().unwrap();

    // Every job there was completed once; every acknowledged one is among them, and so is
    // every number the producer moved past. A call whose answer was lost may have enqueued a
    // job the producer then enqueued again: counted, not lost.
    db.assert_each_done_once("net", total).await;
    let listed = db.client.jobs(None, None, 0, 1_000_000).await.unwrap();
    let ids: std::collections::HashSet<i64> = listed.iter().map(|j| j.id).collect();
    assert!(
        acked.iter().all(|id| ids.contains(id)),
        "an acknowledged job is gone"
    );
    let numbers: std::collections::HashSet<i64> = listed
        .iter()
        .map(|j| j.payload.parse::<i64>().unwrap())
        .collect();
    assert!(
        (0..numbered).all(|n| numbers.contains(&n)),
        "a job is missing"
    );
    let runs = runs.load(Ordering::Relaxed);
    eprintln!(
        "{engine:?} stalls of {stalls:?} (lease {}, statement timeout {:?}): {total} jobs ({} \
         acknowledged, {} enqueued twice after an unanswered call, {failed} failed enqueue \
         calls), each completed once; {runs} handler runs ({:.3} per job); work resumed \
         {resumed:?} after each stall healed",
        lease.map_or("30s (default)".into(), |l| format!("{l:?}")),
        backend.statement_timeout.unwrap(),
        acked.len(),
        total - numbered,
        runs as f64 / total as f64,
    );
    drop(proxy);
    db.drop_db().await;
}

backlog_testdb::on_server_backends!(
    stalls_lose_nothing_and_do_nothing_twice,
    a_begin_answered_late_leaves_no_transaction_open,
    latency,
    a_partitioned_worker_comes_back_late,
    a_worker_cut_off_mid_claim_holds_its_job_no_longer_than_a_lease,
    a_stall_never_hangs
);

// The same on a Galera node: the fix is the pool's, whatever the server.
backlog_testdb::on_galera!(a_begin_answered_late_leaves_no_transaction_open);
