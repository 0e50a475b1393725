//! The `examples/` programs run to success on every backend (cargo builds them with the tests).

mod common;

use std::process::Command;

use common::{Engine, TestDb};

async fn run_example(name: &str, engine: Engine) {
    let db = TestDb::new(engine).await;
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `cargo test --workspace`, which builds the examples",
        bin.display()
    );
    let out = Command::new(&bin)
        .env("BACKLOG_DATABASE_URL", &db.url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "example {name} failed on {engine:?}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    db.drop_db().await;
}

macro_rules! examples {
    ($($name:ident),* $(,)?) => {
        $( mod $name {
            #[tokio::test] async fn sqlite() { super::run_example(stringify!($name), super::Engine::Sqlite).await }
            #[cfg(feature = "servers")]
            #[tokio::test] async fn postgres() { super::run_example(stringify!($name), super::Engine::Postgres).await }
            #[cfg(feature = "servers")]
            #[tokio::test] async fn mysql() { super::run_example(stringify!($name), super::Engine::MySql).await }
        } )*
    };
}

examples!(typed_worker, cron_fanout_wait, flow_control);

/// This one shows the application's own SQLite pool, so it makes its own database.
#[tokio::test]
async fn transactions() {
    run_example("transactions", Engine::Sqlite).await;
}
