//! PostgreSQL wake-ups: rows inserted by plain SQL (any language, no backlog code) wake the
//! backend's `listen` callback, once per queue per statement, over one shared connection that
//! comes back by itself after it is killed.
#![cfg(feature = "servers")]

use std::sync::Arc;
use std::time::Duration;

use backlog_core::Backend;
use backlog_sql::PgBackend;
use sqlx::{Connection, PgConnection};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::time::timeout;

/// Where PostgreSQL is (required: an unreachable server fails the test).
fn postgres_url() -> String {
    std::env::var("BACKLOG_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// How long a wake-up may take.
const WAKE: Duration = Duration::from_secs(2);

/// The channel is database-wide, so other tests' queues may show up: queues here carry the
/// schema's (random) name as a prefix and everything else is ignored.
struct Wakes {
    rx: UnboundedReceiver<String>,
    prefix: String,
}

impl Wakes {
    /// The next wake-up for one of this test's queues, without the prefix.
    async fn next(&mut self) -> String {
        self.within(WAKE).await.expect("no wake-up within 2 s")
    }

    /// The first wake-up for this test's queues within `d`, if any.
    async fn within(&mut self, d: Duration) -> Option<String> {
        timeout(d, async {
            loop {
                let q = self.rx.recv().await.expect("the listener is alive");
                if let Some(rest) = q.strip_prefix(&self.prefix) {
                    return rest.to_owned();
                }
            }
        })
        .await
        .ok()
    }

    /// Every wake-up up to and including `last` (notifications arrive in commit order, so one
    /// for a later statement proves that all for earlier ones have arrived).
    async fn until(&mut self, last: &str) -> Vec<String> {
        let mut seen = vec![];
        loop {
            let q = self.next().await;
            seen.push(q.clone());
            if q == last {
                return seen;
            }
        }
    }
}

fn wake_into(prefix: &str) -> (backlog_core::WakeFn, Wakes) {
    let (tx, rx) = unbounded_channel();
    let wake: backlog_core::WakeFn = Arc::new(move |q: &str| {
        tx.send(q.to_owned()).ok();
    });
    let prefix = prefix.to_owned();
    (wake, Wakes { rx, prefix })
}

async fn insert(c: &mut PgConnection, queue: &str) {
    sqlx::query("INSERT INTO backlog_job (queue, payload) VALUES ($1, '{}')")
        .bind(queue)
        .execute(c)
        .await
        .unwrap();
}

/// Backends of this test's LISTEN connections (by application name).
async fn listening(c: &mut PgConnection, app: &str) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
    )
    .bind(app)
    .fetch_all(c)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_sql_inserts_wake_listeners() {
    let name = format!("bl_n_{:016x}", rand::random::<u64>());
    let mut admin = PgConnection::connect(&postgres_url())
        .await
        .expect("PostgreSQL is required");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let sep = if postgres_url().contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!(
        "{}{sep}options=-c%20search_path%3D{name}&application_name={name}",
        postgres_url()
    );
    let b = PgBackend::connect(&url, &Default::default()).await.unwrap();
    b.migrate().await.unwrap();
    let prefix = format!("{name}_");
    let q = |s: &str| format!("{prefix}{s}");

    let (wake, mut wakes) = wake_into(&prefix);
    assert!(b.listen(wake).await.unwrap());
    let (wake2, mut wakes2) = wake_into(&prefix);
    assert!(b.listen(wake2).await.unwrap());
    assert_eq!(
        listening(&mut admin, &name).await.len(),
        1,
        "one LISTEN connection per backend"
    );

    // Any client, plain SQL: no backlog code on the inserting side.
    let mut c = PgConnection::connect(&url).await.unwrap();
    insert(&mut c, &q("a")).await;
    assert_eq!(wakes.next().await, "a");
    assert_eq!(wakes2.next().await, "a", "every listen() callback is woken");

    // One statement, many rows: one wake-up per queue with available jobs.
    sqlx::query(
        "INSERT INTO backlog_job (queue, payload, state) VALUES \
         ($1, '{}', 'available'), ($1, '{}', 'available'), ($2, '{}', 'available'), \
         ($1, '{}', 'available'), ($3, '{}', 'held')",
    )
    .bind(q("a"))
    .bind(q("b"))
    .bind(q("held"))
    .execute(&mut c)
    .await
    .unwrap();
    // A rolled-back insert wakes nobody.
    let mut tx = c.begin().await.unwrap();
    insert(&mut tx, &q("rolled-back")).await;
    tx.rollback().await.unwrap();
    insert(&mut c, &q("end")).await;
    let mut seen = wakes.until("end").await;
    seen.sort();
    assert_eq!(seen, ["a", "b", "end"]);

    // The LISTEN connection is killed: it comes back by itself (wake-ups in between are lost,
    // so insert until one arrives).
    let pids = listening(&mut admin, &name).await;
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pids[0])
        .execute(&mut admin)
        .await
        .unwrap();
    let back = timeout(Duration::from_secs(15), async {
        loop {
            insert(&mut c, &q("again")).await;
            if let Ok(Some(w)) = timeout(Duration::from_millis(250), wakes.rx.recv()).await
                && w == q("again")
            {
                return;
            }
        }
    })
    .await;
    assert!(back.is_ok(), "no wake-up after the LISTEN connection died");

    // Closing the backend stops the listener (close waits for every pooled connection).
    timeout(Duration::from_secs(5), b.close())
        .await
        .expect("close() hangs on the LISTEN connection");
    c.close().await.ok();
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {name} CASCADE")))
        .execute(&mut admin)
        .await
        .unwrap();
}

/// Connections backlog opens keep the trigger quiet (a notifying commit takes a database-wide
/// lock, so producers would queue on it); backlog then sends the wake-ups of what it enqueued
/// itself, after the commit, and an enqueue inside a caller's transaction wakes at its commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_enqueues_wake_other_processes() {
    use backlog_core::{JobInsertParams, NewJob, Payload, QueueName};
    use backlog_sql::JobConnection;

    let name = format!("bl_m_{:016x}", rand::random::<u64>());
    let mut admin = PgConnection::connect(&postgres_url())
        .await
        .expect("PostgreSQL is required");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let sep = if postgres_url().contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!("{}{sep}options=-c%20search_path%3D{name}", postgres_url());
    // Two processes: one enqueues, the other listens.
    let producer = PgBackend::connect(&url, &Default::default()).await.unwrap();
    producer.migrate().await.unwrap();
    let worker = PgBackend::connect(&url, &Default::default()).await.unwrap();
    let prefix = format!("{name}_");
    let (wake, mut wakes) = wake_into(&prefix);
    assert!(worker.listen(wake).await.unwrap());

    let quiet: String = sqlx::query_scalar("SELECT current_setting('backlog.notify', true)")
        .fetch_one(producer.pool())
        .await
        .unwrap();
    assert_eq!(quiet, "off", "backlog's connections keep the trigger quiet");

    let job = |q: &str| {
        NewJob::new(
            QueueName::new(format!("{prefix}{q}")).unwrap(),
            Payload::parse("{}", backlog_core::DEFAULT_PAYLOAD_LIMIT).unwrap(),
        )
    };
    let insert = |jobs: Vec<NewJob>| producer.job_insert(JobInsertParams { jobs, now: 1 });
    insert(vec![job("one")]).await.unwrap();
    assert_eq!(wakes.next().await, "one", "a single enqueue wakes");
    // A batch over two queues (and more rows than one statement takes) wakes each queue.
    let mut many: Vec<NewJob> = (0..1500).map(|_| job("many")).collect();
    many.push(job("other"));
    insert(many).await.unwrap();
    let mut seen = vec![wakes.next().await, wakes.next().await];
    seen.sort();
    assert_eq!(seen, ["many", "other"]);

    // Inside a transaction on one of backlog's own connections: at commit, not on rollback.
    let mut tx = producer.pool().begin().await.unwrap();
    tx.backlog_enqueue(vec![job("rolled-back")], 1)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let mut tx = producer.pool().begin().await.unwrap();
    tx.backlog_enqueue(vec![job("committed")], 1).await.unwrap();
    assert_eq!(
        wakes.within(Duration::from_millis(300)).await,
        None,
        "no wake-up before the commit"
    );
    tx.commit().await.unwrap();
    assert_eq!(wakes.next().await, "committed");

    // Many producers at once: every queue is woken, however the sends were folded together.
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let p = producer.clone();
            let j = job(&format!("p{i:02}"));
            tokio::spawn(async move {
                p.job_insert(JobInsertParams {
                    jobs: vec![j],
                    now: 1,
                })
                .await
                .unwrap()
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let mut seen: Vec<String> = Vec::new();
    while seen.len() < 16 {
        let q = wakes.next().await;
        if !seen.contains(&q) {
            seen.push(q);
        }
    }
    seen.sort();
    let want: Vec<String> = (0..16).map(|i| format!("p{i:02}")).collect();
    assert_eq!(seen, want);

    producer.close().await;
    worker.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {name} CASCADE")))
        .execute(&mut admin)
        .await
        .unwrap();
}
