//! Clients whose clocks are 30 s ahead of or behind the database's, on every backend. Each reads
//! the database's time (its own clock plus a measured offset), so no lease is rescued before it
//! really expired, no delayed job runs early, and a job inserted by plain SQL with the
//! database's `now` is due at once for a client whose clock is slow. A client told to trust its
//! own clock ([`TimeSource::Local`]) shows what goes wrong without it.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog::{
    CancellationToken, ClaimOpts, Client, Clock, JobContext, JobState, MaintenanceConfig, Outcome,
    SystemClock, TimeSource, Worker,
};
use common::{Engine, TestDb};

const SKEW: i64 = 30_000_000;

/// This machine's clock, moved by a fixed amount: a machine whose clock is wrong.
#[derive(Debug)]
struct Skewed(i64);

impl Clock for Skewed {
    fn now(&self) -> i64 {
        SystemClock.now() + self.0
    }
}

/// A second client of the test's database whose clock is off by `skew`, reading `source`.
async fn skewed(db: &TestDb, skew: i64, source: TimeSource) -> Client {
    let c = Client::connect(&db.url)
        .await
        .unwrap()
        .with_clock(Arc::new(Skewed(skew)))
        .with_time_source(source);
    let sync = c.sync_clock().await.unwrap();
    if source == TimeSource::Database {
        let sync = sync.expect("a database has a clock");
        // The offset undoes the skew, to within the round trip and the database clock's grain
        // (SQLite's julianday has milliseconds).
        let error = (sync.offset_us + skew).abs();
        assert!(
            error < 50_000 + sync.round_trip_us,
            "{sync:?} for a skew of {skew}"
        );
        assert_eq!(c.clock_offset(), sync.offset_us);
    } else {
        assert_eq!(sync, None);
    }
    c
}

/// A test database, a client 30 s slow and one 30 s fast (both reading the database's time),
/// and a job the slow one enqueued.
async fn slow_and_fast(engine: Engine) -> (TestDb, Client, Client, i64) {
    let db = TestDb::new(engine).await;
    let slow = skewed(&db, -SKEW, TimeSource::Database).await;
    let fast = skewed(&db, SKEW, TimeSource::Database).await;
    let job = slow.new_job("skew", &1).unwrap();
    let id = slow.enqueue(job).await.unwrap().id;
    (db, slow, fast, id)
}

fn opts(lease: Duration) -> ClaimOpts {
    ClaimOpts::new("skew").unwrap().lease(lease)
}

/// A job claimed by a client whose clock is 30 s slow is not rescued by one whose clock is 30 s
/// fast until its lease really expired; then it is, once.
async fn leases_expire_by_the_database_clock(engine: Engine) {
    let (db, slow, fast, id) = slow_and_fast(engine).await;
    let lease = Duration::from_secs(2);
    let started = Instant::now();
    let first = slow.claim(&opts(lease).owner("slow")).await.unwrap();
    assert_eq!(first.len(), 1);
    // 60 s apart by their own clocks, but the lease has 2 s left by the database's.
    assert_eq!(
        fast.rescue().await.unwrap(),
        0,
        "rescued before its lease ran out"
    );
    assert!(
        fast.claim(&opts(lease).owner("fast"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(db.client.job(id).await.unwrap().state, JobState::Running);
    tokio::time::sleep((lease + Duration::from_millis(300)).saturating_sub(started.elapsed()))
        .await;
    assert_eq!(
        fast.rescue().await.unwrap(),
        1,
        "not rescued once it expired"
    );
    let second = fast.claim(&opts(lease).owner("fast")).await.unwrap();
    assert_eq!((second[0].id, second[0].attempt), (id, 2));
    // The first holder's late report changes nothing.
    assert!(slow.complete(&first[0]).await.is_err());
    fast.complete(&second[0]).await.unwrap();
    assert_eq!(db.client.job(id).await.unwrap().attempt, 2);
    db.drop_db().await;
}

/// What the database's time prevents: a client trusting a clock 30 s fast rescues a job whose
/// lease has most of its time left.
async fn a_clock_trusted_as_is_rescues_early(engine: Engine) {
    let db = TestDb::new(engine).await;
    let honest = skewed(&db, 0, TimeSource::Database).await;
    let fast = skewed(&db, SKEW, TimeSource::Local).await;
    honest
        .enqueue(honest.new_job("skew", &1).unwrap())
        .await
        .unwrap();
    let claimed = honest.claim(&opts(Duration::from_secs(20))).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        fast.rescue().await.unwrap(),
        1,
        "the fast clock saw the lease as long expired"
    );
    db.drop_db().await;
}

/// A job inserted by plain SQL (due at the database's `now`) is claimed at once by a client
/// whose clock is 30 s slow; a job delayed by 2 s is not claimed early by one 30 s fast.
async fn due_times_by_the_database_clock(engine: Engine) {
    let db = TestDb::new(engine).await;
    let slow = skewed(&db, -SKEW, TimeSource::Database).await;
    let fast = skewed(&db, SKEW, TimeSource::Database).await;
    db.exec("INSERT INTO backlog_job (queue, payload) VALUES ('skew', '{\"plain\": true}')")
        .await;
    let plain = slow.claim(&opts(Duration::from_secs(30))).await.unwrap();
    assert_eq!(
        plain.len(),
        1,
        "a plain INSERT's job was held back by a slow clock"
    );
    slow.complete(&plain[0]).await.unwrap();

    let mut delayed = slow.new_job("skew", &2).unwrap();
    delayed.run_at = Some(slow.now() + 2_000_000);
    let started = Instant::now();
    let id = slow.enqueue(delayed).await.unwrap().id;
    let early = fast.claim(&opts(Duration::from_secs(30))).await.unwrap();
    assert!(early.is_empty(), "a delayed job ran {:?} early", early);
    tokio::time::sleep(Duration::from_millis(2_300).saturating_sub(started.elapsed())).await;
    let due = fast.claim(&opts(Duration::from_secs(30))).await.unwrap();
    assert_eq!(due.iter().map(|j| j.id).collect::<Vec<_>>(), [id]);
    db.drop_db().await;
}

/// The runtime: a worker whose clock is 30 s slow runs a job for three times its lease,
/// heartbeating, while another process's maintenance, 30 s fast, rescues every 100 ms. The job
/// runs once and completes at its first attempt.
async fn a_slow_worker_keeps_its_lease_against_a_fast_rescuer(engine: Engine) {
    let (db, slow, fast, id) = slow_and_fast(engine).await;
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let worker = Worker::builder(slow)
        .queue("skew", 1)
        .fallback_handler(move |_ctx: JobContext| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_millis(3_000)).await;
                Ok(Outcome::Complete)
            }
        })
        .configure(|c| {
            c.lease = Some(Duration::from_secs(1));
            c.maintenance = None;
            c.drain = Some(backlog::DrainMode::All);
        })
        .build()
        .unwrap();
    let rescuer = Worker::builder(fast)
        .queue("other", 1)
        .fallback_handler(|_ctx: JobContext| async { Ok(Outcome::Complete) })
        .configure(|c| {
            c.maintenance = Some(MaintenanceConfig {
                rescue_every: Duration::from_millis(100),
                ..MaintenanceConfig::default()
            })
        })
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let rescuing = tokio::spawn({
        let stop = stop.clone();
        async move { rescuer.run(stop).await }
    });
    let report = tokio::time::timeout(
        Duration::from_secs(20),
        worker.run(CancellationToken::new()),
    )
    .await
    .expect("the worker drains")
    .unwrap();
    stop.cancel();
    rescuing.await.unwrap().unwrap();
    assert_eq!(report.completed, 1, "{report:?}");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let job = db.client.job(id).await.unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Completed, 1));
    db.drop_db().await;
}

/// A job a plain `INSERT` has just made is due at once to a client with no skew at all, to the
/// microsecond: its `run_at` (the column default, the database's clock) is never after the
/// client's "now" read right after. SQLite's clock has millisecond resolution; the offset the
/// client measured from it was up to a millisecond low, so such a job was often not due yet.
async fn a_plain_insert_is_due_at_once(engine: Engine) {
    let db = TestDb::new(engine).await;
    let client = Client::connect(&db.url).await.unwrap();
    client.sync_clock().await.unwrap();
    let mut late = 0;
    for _ in 0..300 {
        db.exec("INSERT INTO backlog_job (queue, payload) VALUES ('plain', '{}')")
            .await;
        let now = client.now();
        let run_at = db
            .scalar("SELECT MAX(run_at) FROM backlog_job_all WHERE queue = 'plain'")
            .await;
        if run_at > now {
            late += 1;
        }
    }
    assert_eq!(late, 0, "{late} of 300 jobs were not due at once");
    db.drop_db().await;
}

backlog_testdb::on_every_backend!(
    a_plain_insert_is_due_at_once,
    leases_expire_by_the_database_clock,
    a_clock_trusted_as_is_rescues_early,
    due_times_by_the_database_clock,
    a_slow_worker_keeps_its_lease_against_a_fast_rescuer,
);
