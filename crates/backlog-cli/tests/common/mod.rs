//! Shared helpers for tests that drive the `backlog` binary: one isolated database per test on
//! SQLite, PostgreSQL (its own schema) or MariaDB (its own database), and each engine's own client
//! for plain SQL. PostgreSQL and MariaDB are required.
#![allow(dead_code)]

pub mod client_contract;
pub mod languages;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_backlog");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
    MySql,
}

pub struct TestDb {
    pub engine: Engine,
    pub url: String,
    pub dir: tempfile::TempDir,
    name: String,
}

fn pg_base() -> String {
    std::env::var("BACKLOG_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn my_base() -> String {
    std::env::var("BACKLOG_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("client runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl TestDb {
    /// A fresh database, migrated.
    pub fn new(engine: Engine) -> TestDb {
        let db = TestDb::unmigrated(engine);
        db.ok(&["migrate"]);
        db
    }

    /// A fresh database without the schema (an empty SQLite file path, schema or database).
    pub fn unmigrated(engine: Engine) -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("bl_c_{:016x}", rand_u64());
        let url = match engine {
            Engine::Sqlite => format!("sqlite://{}", dir.path().join("t.db").display()),
            Engine::Postgres => {
                run_ok(Command::new("psql").arg(pg_base()).args([
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-qc",
                    &format!("CREATE SCHEMA {name}"),
                ]));
                format!("{}?options=-c%20search_path%3D{name}", pg_base())
            }
            Engine::MySql => {
                let (host, port) = ("127.0.0.1", "3306");
                run_ok(Command::new("mariadb").args([
                    "-h",
                    host,
                    "-P",
                    port,
                    "-u",
                    "root",
                    "-e",
                    &format!("CREATE DATABASE {name}"),
                ]));
                format!("mysql://root@127.0.0.1:3306/{name}")
            }
        };
        TestDb {
            engine,
            url,
            dir,
            name,
        }
    }

    /// A database on SQLite, and with the server tier (feature `servers`) on PostgreSQL and
    /// MariaDB.
    pub fn all() -> Vec<TestDb> {
        let mut all = vec![TestDb::new(Engine::Sqlite)];
        if cfg!(feature = "servers") {
            all.extend([TestDb::new(Engine::Postgres), TestDb::new(Engine::MySql)]);
        }
        all
    }

    /// Runs plain SQL through the engine's own command-line client; returns its output.
    pub fn sql(&self, sql: &str) -> String {
        match self.engine {
            Engine::Sqlite => {
                let path = self.url.trim_start_matches("sqlite://");
                run_ok(Command::new("sqlite3").args([path, sql]))
            }
            Engine::Postgres => run_ok(Command::new("psql").arg(&self.url).args([
                "-v",
                "ON_ERROR_STOP=1",
                "-Atqc",
                sql,
            ])),
            Engine::MySql => run_ok(Command::new("mariadb").args([
                "-h",
                "127.0.0.1",
                "-P",
                "3306",
                "-u",
                "root",
                "-N",
                "-B",
                &self.name,
                "-e",
                sql,
            ])),
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("BACKLOG_DATABASE_URL", &self.url)
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("backlog runs")
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "backlog {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs and expects failure with `needle` in stderr.
    pub fn fails(&self, args: &[&str], needle: &str) {
        let out = self.run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "backlog {args:?} succeeded; stdout {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            err.contains(needle),
            "backlog {args:?}: stderr {err:?} lacks {needle:?}"
        );
    }

    pub fn stats(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["stats", "--json"])).unwrap()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return; // keep it for a post-mortem
        }
        match self.engine {
            Engine::Sqlite => {}
            Engine::Postgres => {
                let _ = Command::new("psql")
                    .arg(pg_base())
                    .args(["-qc", &format!("DROP SCHEMA {} CASCADE", self.name)])
                    .output();
            }
            Engine::MySql => {
                let _ = Command::new("mariadb")
                    .args([
                        "-h",
                        "127.0.0.1",
                        "-u",
                        "root",
                        "-e",
                        &format!("DROP DATABASE {}", self.name),
                    ])
                    .output();
            }
        }
    }
}

pub fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish()
}
