#![allow(missing_docs)]
//! URLs that list several hosts (`h1:p1,h2:p2`), on PostgreSQL and MariaDB: a host that does
//! not answer is passed over, a list where none answers fails clearly, and a malformed list is
//! refused. (A host lost while in use: the Galera node-kill test in `processes`.)
#![cfg(feature = "servers")]

mod common;

use std::time::{Duration, Instant};

use backlog::{BackendConfig, Client, Error};
use common::{Engine, TestDb};

/// A loopback port nothing listens on.
const NOBODY: &str = "127.0.0.1:1";

/// `url` with `hosts` listed before its own host.
fn with_hosts_before(url: &str, hosts: &str) -> String {
    let (head, rest) = url.split_once('@').expect("user@host");
    format!("{head}@{hosts},{rest}")
}

fn config() -> BackendConfig {
    BackendConfig {
        connect_timeout: Duration::from_secs(2),
        host_check_every: Duration::from_millis(100),
        ..BackendConfig::default()
    }
}

async fn a_host_that_does_not_answer_is_passed_over(engine: Engine) {
    let db = TestDb::new(engine).await;
    let url = with_hosts_before(&db.url, NOBODY);
    let client = Client::connect_with(&url, &config()).await.unwrap();
    let id = client
        .enqueue(client.new_job("hosts", &1).unwrap())
        .await
        .unwrap()
        .id;
    assert_eq!(client.job(id).await.unwrap().id, id);
    // Seen by the test's own client, on the host the list fell through to.
    let queue = backlog::QueueName::new("hosts").unwrap();
    assert_eq!(
        db.client.stats(Some(&queue)).await.unwrap()[0].1.available,
        1
    );
    client.close().await;
    db.drop_db().await;
}

async fn no_host_answering_fails_clearly(engine: Engine) {
    let db = TestDb::new(engine).await;
    // Two dead hosts and not the real one, with a password that must not show.
    let (head, rest) = db.url.split_once('@').unwrap();
    let tail = &rest[rest.find(['/', '?']).unwrap_or(rest.len())..];
    let url = format!("{head}:secret@127.0.0.1:1,127.0.0.1:2{tail}");
    let started = Instant::now();
    let err = Client::connect_with(&url, &config()).await.unwrap_err();
    let text = err.to_string();
    assert!(err.is_transient(), "{err:?}");
    assert!(text.contains("no host of the list answers"), "{text}");
    assert!(!text.contains("secret"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    db.drop_db().await;
}

async fn a_malformed_host_list_is_refused(engine: Engine) {
    let db = TestDb::new(engine).await;
    for bad in [
        with_hosts_before(&db.url, ""),
        with_hosts_before(&db.url, "127.0.0.1:9,127.0.0.1:9"),
    ] {
        let err = Client::connect_with(&bad, &config()).await.unwrap_err();
        assert!(
            matches!(err, Error::DatabaseUrlInvalid { .. }),
            "{bad}: {err:?}"
        );
    }
    db.drop_db().await;
}

backlog_testdb::on_server_backends!(
    a_host_that_does_not_answer_is_passed_over,
    no_host_answering_fails_clearly,
    a_malformed_host_list_is_refused,
);
