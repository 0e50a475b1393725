//! A client made from the user's own sqlx pool, and enqueueing inside the user's own sqlx
//! transaction: the job exists only if that transaction commits. Every backend.

mod common;

use backlog::sqlx::{self, Connection};
use backlog::{Client, MySqlBackend, PgBackend, SqlBackend, SqliteBackend};
use common::{Engine, TestDb};

/// The user's side: an `orders` table and a job per order, written in one transaction.
macro_rules! order_and_job {
    ($pool:expr, $client:expr, $insert:literal, $commit:expr) => {{
        let mut tx = $pool.begin().await.unwrap();
        sqlx::query($insert).bind(7_i64).execute(&mut *tx).await.unwrap();
        let job = $client
            .new_job("receipts", &serde_json::json!({"order": 7}))
            .unwrap();
        let id = $client.enqueue_in(&mut *tx, vec![job]).await.unwrap()[0].id;
        if $commit {
            tx.commit().await.unwrap();
        } else {
            tx.rollback().await.unwrap();
        }
        id
    }};
}

async fn own_pool_and_transaction(engine: Engine) {
    let db = TestDb::new(engine).await;
    db.exec("CREATE TABLE orders (id BIGINT NOT NULL)").await;
    let (client, ids) = match engine {
        Engine::Sqlite => {
            let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
            let client =
                Client::from_sql(SqlBackend::Sqlite(SqliteBackend::from_pool(pool.clone())));
            let gone = order_and_job!(pool, client, "INSERT INTO orders (id) VALUES (?)", false);
            let kept = order_and_job!(pool, client, "INSERT INTO orders (id) VALUES (?)", true);
            (client, (gone, kept))
        }
        Engine::Postgres => {
            let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
            let client = Client::from_sql(SqlBackend::Postgres(PgBackend::from_pool(pool.clone())));
            let gone = order_and_job!(pool, client, "INSERT INTO orders (id) VALUES ($1)", false);
            let kept = order_and_job!(pool, client, "INSERT INTO orders (id) VALUES ($1)", true);
            (client, (gone, kept))
        }
        Engine::Galera => unreachable!("not run on Galera"),
        Engine::MySql => {
            let pool = sqlx::MySqlPool::connect(&db.url).await.unwrap();
            let client = Client::from_sql(SqlBackend::MySql(MySqlBackend::from_pool(pool.clone())));
            let gone = order_and_job!(pool, client, "INSERT INTO orders (id) VALUES (?)", false);
            let kept = order_and_job!(pool, client, "INSERT INTO orders (id) VALUES (?)", true);
            (client, (gone, kept))
        }
    };
    // Only the committed order and its job exist (SQLite may hand the rolled-back id out again).
    let (gone, kept) = ids;
    if gone != kept {
        assert!(matches!(
            client.job(gone).await,
            Err(backlog::Error::JobNotFound { .. })
        ));
    }
    let job = client.job(kept).await.unwrap();
    assert_eq!(
        (job.queue.as_str(), job.state),
        ("receipts", backlog::JobState::Available)
    );
    assert_eq!(db.scalar("SELECT COUNT(*) FROM orders").await, 1);
    assert_eq!(db.scalar("SELECT COUNT(*) FROM backlog_job_all").await, 1);
    // The client made from the pool does everything else too.
    let claimed = client
        .claim(&backlog::ClaimOpts::new("receipts").unwrap())
        .await
        .unwrap();
    client.complete(&claimed[0]).await.unwrap();
    client.close().await;
    db.drop_db().await;
}

/// A job the client refuses is refused before anything is written in the caller's transaction.
async fn bad_jobs_change_nothing(engine: Engine) {
    let db = TestDb::new(engine).await;
    let big = Client::connect(&db.url)
        .await
        .unwrap()
        .new_job("receipts", &"x".repeat(64))
        .unwrap();
    let client = Client::connect(&db.url)
        .await
        .unwrap()
        .with_payload_limit(16);
    let mut bad_attempts = client.new_job("receipts", &1).unwrap();
    bad_attempts.max_attempts = Some(0);
    for bad in [big, bad_attempts] {
        let e = match engine {
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
                client.enqueue_in(&mut c, vec![bad]).await.unwrap_err()
            }
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
                client.enqueue_in(&mut c, vec![bad]).await.unwrap_err()
            }
            Engine::Galera => unreachable!("not run on Galera"),
            Engine::MySql => {
                let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
                client.enqueue_in(&mut c, vec![bad]).await.unwrap_err()
            }
        };
        assert!(
            matches!(
                e,
                backlog::Error::PayloadTooLarge { .. } | backlog::Error::ValueOutOfRange { .. }
            ),
            "{e}"
        );
    }
    assert_eq!(db.scalar("SELECT COUNT(*) FROM backlog_job_all").await, 0);
    client.close().await;
    db.drop_db().await;
}

backlog_testdb::on_every_backend!(own_pool_and_transaction, bad_jobs_change_nothing);
