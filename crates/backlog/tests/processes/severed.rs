//! Database connections cut one at a time under four worker processes and a producer process
//! (`pg_terminate_backend`, MariaDB's `KILL CONNECTION`), on the main servers, and on the
//! PostgreSQL fault cluster, which runs with autovacuum on as users' servers do (the machine's
//! main cluster has it off). The processes are never restarted. `BACKLOG_SEVERED_JOBS` sets the
//! count (6,000 by default).

use std::time::{Duration, Instant};

use backlog::QueueSettings;

use super::restarts::{backend, fault_server, own_server};
use super::{Children, Engine, FIRE_PROCESSES, TestDb, each_done_once, producer, spawn_child};

/// Which server of an engine a run uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Server {
    /// The machine's main server (PostgreSQL with autovacuum off).
    Main,
    /// The fault server (`scripts/fault_server.sh`; PostgreSQL with autovacuum on), held for
    /// this test alone so that no restart test runs into it.
    Fault,
}

/// The MariaDB user the producer connects as, so that its connections can be told apart.
const MY_PRODUCER: &str = "bl_producer";

/// The jobs of `severed_connections` (`BACKLOG_SEVERED_JOBS` for a longer run from a script).
fn severed_jobs() -> i64 {
    std::env::var("BACKLOG_SEVERED_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6_000)
}

/// The backlog connections of the processes of `severed_connections`: on PostgreSQL those with
/// its `application_name` (the LISTEN connection among them; the producer's ends in `_p`), on
/// MariaDB those using its database (the producer's as user [`MY_PRODUCER`]). Busy ones (in a
/// statement, a claim or a completion's commit) come first half of the time; every fifth cut,
/// the first among them, goes to PostgreSQL's LISTEN connection, and every fifth, the third, to
/// the producer's. Returns what it cut: `None`, `"listen"`, `"producer"` or `"other"`.
async fn cut_one(admin: &Admin, name: &str, round: usize) -> Option<&'static str> {
    let busy_first = rand::random_bool(0.5);
    let kind = match round % 5 {
        1 if matches!(admin, Admin::Pg(_)) => "listen",
        3 => "producer",
        _ => "other",
    };
    match admin {
        Admin::Pg(pool) => {
            let filter = if kind == "listen" {
                "query LIKE 'LISTEN%'"
            } else if busy_first {
                "state = 'active'"
            } else {
                "TRUE"
            };
            let app = match kind {
                "producer" => format!("{name}_p"),
                _ => name.to_owned(),
            };
            let sql = format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = '{app}' AND {filter} ORDER BY random() LIMIT 1"
            );
            let cut: Option<bool> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_optional(pool)
                .await
                .unwrap();
            cut.unwrap_or(false).then_some(kind)
        }
        Admin::My(pool) => {
            let mut filter = if busy_first {
                "COMMAND <> 'Sleep'".to_owned()
            } else {
                "TRUE".to_owned()
            };
            if kind == "producer" {
                filter += &format!(" AND USER = '{MY_PRODUCER}'");
            }
            let sql = format!(
                "SELECT ID FROM information_schema.PROCESSLIST \
                 WHERE DB = '{name}' AND {filter} ORDER BY RAND() LIMIT 1"
            );
            let id: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_optional(pool)
                .await
                .unwrap();
            let id = id?;
            // The connection may have closed since: ER_NO_SUCH_THREAD is fine.
            let kill = format!("KILL CONNECTION {id}");
            let killed = sqlx::query(sqlx::AssertSqlSafe(kill)).execute(pool).await;
            killed.is_ok().then_some(kind)
        }
    }
}

/// A count, on the admin pool.
async fn count(admin: &Admin, sql: &str) -> i64 {
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    match admin {
        Admin::Pg(p) => sqlx::query_scalar(sql).fetch_one(p).await.unwrap(),
        Admin::My(p) => sqlx::query_scalar(sql).fetch_one(p).await.unwrap(),
    }
}

/// A pool outside the test's own database, for cutting and counting.
enum Admin {
    Pg(sqlx::PgPool),
    My(sqlx::MySqlPool),
}

/// Four worker processes complete 6,000 jobs transactionally (one results row each, written in
/// the job's own transaction), half of them enqueued before and half by a producer process one
/// call at a time meanwhile, while their database connections are cut one at a time about
/// every 200 ms (`pg_terminate_backend`, MariaDB's `KILL CONNECTION`): pooled ones, busy ones
/// in a claim or a completion's commit, PostgreSQL's LISTEN connection and the producer's. The
/// processes are never restarted. Every job ends completed with exactly one results row: a cut
/// transaction rolls back whole; a completion whose commit outcome is unknown to the worker is
/// settled by the lease token (a retry with a stale token changes nothing, and the job runs
/// again only if the commit did not happen). Every producer call got an id that exists or an
/// error, and no job was lost or enqueued twice (see `producer`).
async fn severed_connections(engine: Engine, server: Server) {
    let jobs = severed_jobs();
    let (before, produced) = (jobs - jobs / 2, jobs / 2);
    let (_held, base) = match (server, engine) {
        (Server::Main, Engine::Postgres) => (None, backlog_testdb::pg_base()),
        (Server::Main, _) => (None, backlog_testdb::my_base()),
        (Server::Fault, _) => {
            let held = own_server(engine).await;
            fault_server(&["ensure", backend(engine)]);
            let base = match engine {
                Engine::Postgres => backlog_testdb::pg_fault_base(),
                _ => backlog_testdb::my_fault_base(),
            };
            (Some(held), base)
        }
    };
    let db = TestDb::new_on(engine, &base).await;
    db.create_results().await;
    db.enqueue_numbered("fire", before).await;
    let c = &db.client;
    let hold = producer::hold_drain(c).await;
    let tag = format!("bl_cut_{:08x}", rand::random::<u32>());
    let (admin, url, producer_url, target, results) = match engine {
        Engine::Postgres => {
            let admin = Admin::Pg(sqlx::PgPool::connect(&base).await.unwrap());
            let url = format!("{}&application_name={tag}", db.url);
            let producer_url = format!("{}&application_name={tag}_p", db.url);
            let results = format!("{}.results", db.name());
            (admin, url, producer_url, tag.clone(), results)
        }
        Engine::MySql => {
            let pool = sqlx::MySqlPool::connect(&base).await.unwrap();
            let name = db.name().to_owned();
            for sql in [
                format!("CREATE USER IF NOT EXISTS '{MY_PRODUCER}'@'127.0.0.1' IDENTIFIED BY ''"),
                format!("GRANT ALL ON {name}.* TO '{MY_PRODUCER}'@'127.0.0.1'"),
            ] {
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&pool)
                    .await
                    .unwrap();
            }
            let mut producer_url = url::Url::parse(&db.url).unwrap();
            producer_url.set_username(MY_PRODUCER).unwrap();
            let results = format!("{name}.results");
            let admin = Admin::My(pool);
            (
                admin,
                db.url.clone(),
                producer_url.to_string(),
                name,
                results,
            )
        }
        Engine::Sqlite | Engine::Galera => unreachable!("run on PostgreSQL and MariaDB"),
    };
    let completed = async || count(&admin, &format!("SELECT COUNT(*) FROM {results}")).await;
    let mut procs = Children(
        (0..FIRE_PROCESSES)
            .map(|i| spawn_child("fire", &url, &format!("cut-{i}")))
            .collect(),
    );
    // Cut only once the processes are at work: the first cut goes to the LISTEN connection.
    let ready = match &admin {
        Admin::Pg(_) => format!(
            "SELECT COUNT(*) FROM pg_stat_activity \
             WHERE application_name = '{target}' AND query LIKE 'LISTEN%'"
        ),
        Admin::My(_) => {
            format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{target}'")
        }
    };
    let waiting = Instant::now();
    while count(&admin, &ready).await == 0 {
        assert!(
            waiting.elapsed() < Duration::from_secs(30),
            "the workers never connected"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("producer.txt");
    let mut producer = Children(vec![producer::spawn(
        &producer_url,
        before,
        produced,
        &calls,
    )]);
    let started = Instant::now();
    let (mut rounds, mut cuts, mut listen_cuts, mut producer_cuts) = (0, 0, 0, 0);
    loop {
        let done = completed().await;
        let running = procs
            .0
            .iter_mut()
            .map(|p| p.try_wait().unwrap().is_none())
            .filter(|&alive| alive)
            .count();
        if done >= jobs || running == 0 {
            break;
        }
        if let Some(status) = producer.0[0].try_wait().unwrap() {
            assert!(status.success(), "the producer failed: {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "no progress while connections were cut: {done} of {jobs} completed, {} producer \
             calls recorded",
            producer::read_calls(&calls).ok
        );
        tokio::time::sleep(Duration::from_millis(rand::random_range(100..300))).await;
        rounds += 1;
        match cut_one(&admin, &target, rounds).await {
            Some("listen") => (cuts, listen_cuts) = (cuts + 1, listen_cuts + 1),
            Some("producer") => (cuts, producer_cuts) = (cuts + 1, producer_cuts + 1),
            Some(_) => cuts += 1,
            None => {}
        }
    }
    producer::wait(&mut producer.0[0], Duration::from_secs(60)).await;
    c.cancel(hold).await.unwrap();
    procs.wait_drained(Duration::from_secs(60)).await;
    assert!(cuts >= 5, "only {cuts} connections were cut");
    if engine == Engine::Postgres {
        assert!(listen_cuts >= 1, "the LISTEN connection was never cut");
    }
    assert!(
        producer_cuts >= 1,
        "the producer's connection was never cut"
    );
    each_done_once(&db, jobs).await;
    let max_attempts = QueueSettings::DEFAULT_MAX_ATTEMPTS;
    let (calls, attempts) =
        producer::check_calls(&db, &calls, before, produced, max_attempts).await;
    eprintln!(
        "{engine:?} ({server:?} server): {jobs} jobs ({produced} by the producer), {cuts} connections cut \
         ({listen_cuts} LISTEN, {producer_cuts} producer), {:.1}s; producer: {} errors, \
         {} found after an error, {} reused; most attempts {attempts}",
        started.elapsed().as_secs_f64(),
        calls.errors,
        calls.found,
        calls.reused,
    );
    if let Admin::My(pool) = &admin {
        let revoke = format!(
            "REVOKE ALL ON {}.* FROM '{MY_PRODUCER}'@'127.0.0.1'",
            db.name()
        );
        sqlx::query(sqlx::AssertSqlSafe(revoke))
            .execute(pool)
            .await
            .unwrap();
    }
    db.drop_db().await;
}

// SQLite has no server connections to cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    severed_connections(Engine::Postgres, Server::Main).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_autovacuum_on() {
    severed_connections(Engine::Postgres, Server::Fault).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql() {
    severed_connections(Engine::MySql, Server::Main).await
}
