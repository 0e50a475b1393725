//! PostgreSQL through PgBouncer in transaction pooling mode (`scripts/pgbouncer.sh`: 4 server
//! connections, shared by every client), as most production PostgreSQL users run it: with
//! `pooler=transaction` on the URL, enqueue, claim, complete, transactional enqueue and
//! completion, the worker and its wake-ups all work, and no client ever gets another's result.
//! (Without it, sqlx's named statements ran with other clients' parameters: docs/scaling.md.)
#![cfg(feature = "servers")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog::sqlx::{self, Connection};
use backlog::{
    CancellationToken, Client, JobContext, JobState, Outcome, PgBackend, SqlBackend, Worker,
};
use common::{pg_base, pgbouncer_base};

/// A database of its own on PostgreSQL (the pooler drops the `options` that would select a
/// schema), reached directly and through the pooler.
struct Bounced {
    name: String,
    /// Straight to PostgreSQL.
    direct: String,
    /// Through PgBouncer, with `pooler=transaction` (and a direct `listen_url` when asked).
    pooled: String,
    client: Arc<Client>,
}

fn with_database(base: &str, db: &str) -> String {
    let mut u = url::Url::parse(base).unwrap();
    u.set_path(&format!("/{db}"));
    u.to_string()
}

impl Bounced {
    async fn new(listen: bool) -> Bounced {
        let name = format!("bl_b_{:016x}", rand::random::<u64>());
        let mut c = sqlx::PgConnection::connect(&pg_base()).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut c)
            .await
            .unwrap();
        c.close().await.ok();
        let direct = with_database(&pg_base(), &name);
        let mut pooled = format!(
            "{}?pooler=transaction",
            with_database(&pgbouncer_base(), &name)
        );
        if listen {
            pooled.push_str(&format!("&listen_url={direct}"));
        }
        let client = Client::connect(&pooled).await.unwrap_or_else(|e| {
            panic!(
                "PgBouncer is required at {} (scripts/pgbouncer.sh): {e}",
                pgbouncer_base()
            )
        });
        client.migrate().await.unwrap();
        Bounced {
            name,
            direct,
            pooled,
            client: Arc::new(client),
        }
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let mut c = sqlx::PgConnection::connect(&self.direct).await.unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut c)
            .await
            .unwrap()
    }

    async fn exec(&self, sql: &str) {
        let mut c = sqlx::PgConnection::connect(&self.direct).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut c)
            .await
            .unwrap();
    }

    async fn drop_db(self) {
        self.client.close().await;
        let mut c = sqlx::PgConnection::connect(&pg_base()).await.unwrap();
        // FORCE: the pooler may still hold server connections to it.
        let drop = format!("DROP DATABASE {} WITH (FORCE)", self.name);
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
            .execute(&mut c)
            .await
            .unwrap();
    }
}

/// The handler's own write in the job's transaction, unnamed as every statement through a
/// transaction pooler must be (`persistent(false)`).
async fn insert_result(c: &mut sqlx::PgConnection, job_id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO results (job_id) VALUES ($1)")
        .bind(job_id)
        .persistent(false)
        .execute(c)
        .await
        .map(|_| ())
}

fn worker(client: &Arc<Client>, poll_max: Duration) -> Worker {
    Worker::builder(client.clone())
        .queue("bounced", 8)
        .fallback_handler(|ctx: JobContext| async move {
            let mut tx = ctx.begin().await?;
            let conn = tx.postgres().expect("a PostgreSQL transaction");
            insert_result(conn, ctx.id()).await?;
            Ok(Outcome::CompleteInTx(tx))
        })
        .configure(|c| {
            c.maintenance = None;
            c.poll_max = poll_max;
        })
        .build()
        .unwrap()
}

/// Producers (one call per job, and batches) and a worker completing every job in the commit of
/// its own write, all through the pooler: each job done exactly once. Then enqueues inside the
/// caller's transactions: backlog's and the caller's own sqlx pool through the pooler.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn enqueue_claim_and_complete_through_the_pooler() {
    let db = Bounced::new(true).await;
    db.exec("CREATE TABLE results (job_id BIGINT NOT NULL)")
        .await;
    let c = &db.client;
    let mut producers = vec![];
    for p in 0..8 {
        let c = c.clone();
        producers.push(tokio::spawn(async move {
            for n in 0..25 {
                let job = c
                    .new_job("bounced", &serde_json::json!({"p": p, "n": n}))
                    .unwrap();
                c.enqueue(job).await.unwrap();
            }
        }));
    }
    let batch = (0..300)
        .map(|n| {
            c.new_job("bounced", &serde_json::json!({"batch": n}))
                .unwrap()
        })
        .collect();
    c.enqueue_many(batch).await.unwrap();
    for p in producers {
        p.await.unwrap();
    }
    let report = worker(c, Duration::from_millis(200)).drain().await.unwrap();
    assert_eq!(report.completed, 500);
    assert_eq!(db.scalar("SELECT COUNT(*) FROM results").await, 500);
    assert_eq!(
        db.scalar("SELECT COUNT(DISTINCT job_id) FROM results")
            .await,
        500
    );

    // backlog's transaction: the job exists only if it commits.
    let mut tx = c.begin().await.unwrap();
    let gone = tx
        .enqueue(vec![c.new_job("later", &1).unwrap()], c.now())
        .await
        .unwrap()[0]
        .id;
    tx.rollback().await.unwrap();
    assert!(matches!(
        c.job(gone).await,
        Err(backlog::Error::JobNotFound { .. })
    ));
    let mut tx = c.begin().await.unwrap();
    let kept = tx
        .enqueue(vec![c.new_job("later", &2).unwrap()], c.now())
        .await
        .unwrap()[0]
        .id;
    tx.commit().await.unwrap();
    assert_eq!(c.job(kept).await.unwrap().state, JobState::Available);

    // The caller's own pool through the pooler (no startup parameters it refuses; the caller's
    // statements unnamed), enqueueing in its transaction with the client made from that pool.
    let opts: sqlx::postgres::PgConnectOptions =
        with_database(&pgbouncer_base(), &db.name).parse().unwrap();
    let pool = sqlx::PgPool::connect_with(opts.extra_float_digits(None))
        .await
        .unwrap();
    let own = Client::from_sql(SqlBackend::Postgres(
        PgBackend::from_pool(pool.clone()).with_transaction_pooler(None),
    ));
    for commit in [false, true] {
        let mut tx = pool.begin().await.unwrap();
        insert_result(&mut tx, -1).await.unwrap();
        let job = own.new_job("later", &3).unwrap();
        let id = own.enqueue_in(&mut *tx, vec![job]).await.unwrap()[0].id;
        match commit {
            true => tx.commit().await.unwrap(),
            false => tx.rollback().await.unwrap(),
        }
        let found = own.job(id).await;
        assert_eq!(found.is_ok(), commit, "{found:?}");
    }
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM results WHERE job_id = -1")
            .await,
        1
    );
    own.close().await;
    db.drop_db().await;
}

/// LISTEN goes to the direct `listen_url`: a plain INSERT made elsewhere wakes an idle worker at
/// once. Without a listen URL the worker polls, and still finds the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wake_ups_come_through_the_direct_listen_url() {
    for listen in [true, false] {
        let db = Bounced::new(listen).await;
        db.exec("CREATE TABLE results (job_id BIGINT NOT NULL)")
            .await;
        // Polling at most every 30 s: only a wake-up is fast. Without LISTEN, every 2 s.
        let poll = if listen {
            Duration::from_secs(30)
        } else {
            Duration::from_secs(2)
        };
        let w = worker(&db.client, poll);
        let stop = CancellationToken::new();
        let run = tokio::spawn({
            let (w, stop) = (w.clone(), stop.clone());
            async move { w.run(stop).await }
        });
        // Idle polls back off (doubling from 10 ms): after 4 s the next one is seconds away.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let listening = db
            .scalar(
                "SELECT COUNT(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
            )
            .await;
        assert_eq!(listening, i64::from(listen), "listen={listen}");
        let started = Instant::now();
        db.exec("INSERT INTO backlog_job (queue, payload) VALUES ('bounced', '{\"plain\": 1}')")
            .await;
        while db.scalar("SELECT COUNT(*) FROM results").await < 1 {
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "listen={listen}: never ran"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if listen {
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "the wake-up did not come: the job waited {:?}",
                started.elapsed()
            );
        }
        stop.cancel();
        run.await.unwrap().unwrap();
        db.drop_db().await;
    }
}

/// 32 callers in 4 clients share the pooler's 4 server connections: every call gets its own
/// result (each reads back the job it enqueued, by id, and finds its own payload), none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_sharing_server_connections_get_their_own_results() {
    let db = Bounced::new(false).await;
    let mut clients = vec![db.client.clone()];
    for _ in 1..4 {
        let c = Client::connect(&db.pooled).await.unwrap();
        clients.push(Arc::new(c));
    }
    let mut tasks = vec![];
    for t in 0..32 {
        let c = clients[t % 4].clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..40 {
                let payload = serde_json::json!({"t": t, "n": n});
                let job = c.new_job("mixed", &payload).unwrap();
                let id = c.enqueue(job).await.unwrap().id;
                let back = c.job(id).await.unwrap();
                assert_eq!(back.id, id);
                let read: serde_json::Value = serde_json::from_str(&back.payload).unwrap();
                assert_eq!(read, payload, "task {t} read another's job");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let pending = db
        .scalar("SELECT COUNT(*) FROM backlog_job_all WHERE queue = 'mixed'")
        .await;
    assert_eq!(pending, 32 * 40);
    for c in &clients[1..] {
        c.close().await;
    }
    db.drop_db().await;
}

/// The pooler settings are checked: a mode other than transaction pooling, a listen URL without
/// a pooler or for another database engine, or either on a MySQL URL is refused, naming what is
/// wrong, and connects nowhere.
#[tokio::test]
async fn bad_pooler_settings_are_refused() {
    let base = pgbouncer_base();
    for (url, says) in [
        (
            format!("{base}?pooler=session"),
            "expected pooler=transaction",
        ),
        (
            format!("{base}?listen_url={}", pg_base()),
            "listen_url is for a URL",
        ),
        (
            format!("{base}?pooler=transaction&listen_url=mysql://h/db"),
            "must be a postgres://",
        ),
        (
            "mysql://root@127.0.0.1:3306/test?pooler=transaction".into(),
            "settings of PostgreSQL",
        ),
    ] {
        let err = Client::connect(&url).await.unwrap_err().to_string();
        assert!(err.contains(says), "{url}: {err}");
    }
}

/// The late `BEGIN` of network.rs through the pooler: the network between the client and
/// PgBouncer stalls as a transaction begins, the call gives up at its deadline, and the `BEGIN`
/// reaches the pooler (and through it a server connection) once the stall heals. Nothing
/// acknowledged afterwards may be lost or invisible. Through a transaction pooler every statement
/// of backlog's runs in a transaction of its own, so even before transactions were begun in a
/// task of their own (network.rs) the next `COMMIT` ended a stray transaction instead of a
/// `ROLLBACK` undoing it: this test passed then too, and holds the pooler's path to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_begin_answered_late_through_the_pooler_leaves_no_transaction_open() {
    use backlog::{BackendConfig, ClaimOpts};
    use backlog_testdb::proxy::Proxy;

    let b = Bounced::new(false).await;
    let proxy = Proxy::for_url(&pgbouncer_base()).await;
    let limit = Duration::from_millis(500);
    let one = BackendConfig {
        max_connections: 1,
        acquire_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(1),
        statement_timeout: Some(limit),
        ..BackendConfig::default()
    };
    let client = Client::connect_with(&proxy.url(&b.pooled), &one)
        .await
        .unwrap();
    for n in 0..2 {
        let job = client.new_job("late", &n).unwrap();
        client.enqueue(job).await.unwrap();
    }
    while backlog_testdb::idle_connections(&client) < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.stall();
    let err = client.begin().await.map(|_| ()).unwrap_err();
    assert!(err.is_transient(), "{err}");
    tokio::time::sleep(limit * 3).await;
    proxy.heal();

    let unfinished = "SELECT COUNT(*) FROM backlog_job WHERE queue = 'late' \
                      AND state IN ('available', 'running')";
    let job = client.new_job("late", &2).unwrap();
    client.enqueue(job).await.unwrap();
    assert_eq!(b.scalar(unfinished).await, 3, "an enqueue is not visible");
    let claimed = client
        .claim(&ClaimOpts::new("late").unwrap().limit(3))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    for job in &claimed {
        client.complete(job).await.unwrap();
    }
    assert_eq!(b.scalar(unfinished).await, 0, "a completion is not visible");
    client.begin().await.unwrap().rollback().await.unwrap();
    client.close().await;
    drop(proxy);
    assert_eq!(b.scalar(unfinished).await, 0, "a completion was undone");
    b.drop_db().await;
}
