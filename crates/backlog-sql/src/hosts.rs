//! Several servers behind one URL, and moving to the next when the one in use goes away.
//!
//! A PostgreSQL or MySQL URL may list hosts separated by commas, as libpq does:
//! `mysql://root@10.0.0.1:3306,10.0.0.2:3306,10.0.0.3/app`. Every connection of a process goes to
//! one host at a time, the first of the list that answers and is ready for writes (a Galera node
//! that is synced, a PostgreSQL server that is not in recovery). [`watch`] looks at that
//! host every `BackendConfig::host_check_every`; when it stops answering or is no longer ready,
//! the pool moves to the next ready host in the list's order (wrapping around), and connections
//! opened before the move are closed when next acquired or released. A process does not move
//! back when an earlier host returns: it stays until the host it uses fails. Listing the hosts
//! in another order per machine spreads the processes over the servers.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backlog_core::{DbErrorKind, Error, Result};
use futures::future::BoxFuture;
use sqlx::pool::{PoolConnectionMetadata, PoolOptions};
use sqlx::{ConnectOptions, Connection, Database, Pool};

use crate::BackendConfig;

/// How long a pooled connection may sit idle and still be used without a ping first.
pub(crate) const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// A URL cut around its hosts: what comes before them (scheme and user information), the
/// hosts as written (`h1:p1,h2:p2`), and the rest (path, query); `None` without a `://`.
fn host_list(url: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    // The hosts follow the user information (up to its last `@`: a password may hold `/` or
    // `?`) and run to the path, the query or the end.
    let at = scheme.len() + 3;
    let start = at + rest.rfind('@').map_or(0, |i| i + 1);
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    Some((&url[..start], &url[start..end], &url[end..]))
}

/// A URL that lists several hosts, with its list starting at host `first` (counted modulo the
/// hosts, wrapping around): what a machine is given to start on its nearest host of a cluster
/// and fail over to the others in order. A URL of one host comes back as it is.
pub fn rotate_hosts(url: &str, first: usize) -> String {
    let Some((head, hosts, tail)) = host_list(url) else {
        return url.to_owned();
    };
    let mut hosts: Vec<&str> = hosts.split(',').collect();
    let n = hosts.len();
    hosts.rotate_left(first % n);
    format!("{head}{}{tail}", hosts.join(","))
}

/// The single-host URLs of a URL that may list several hosts (`h1:p1,h2:p2`), in its order;
/// a URL of one host comes back as it is.
pub(crate) fn split_hosts(url: &str) -> Result<Vec<String>> {
    let invalid = |reason: &str| Error::DatabaseUrlInvalid {
        url: crate::redact_url(url),
        reason: reason.into(),
    };
    let Some((head, hosts, tail)) = host_list(url) else {
        return Ok(vec![url.to_owned()]);
    };
    if !hosts.contains(',') {
        return Ok(vec![url.to_owned()]);
    }
    let mut urls = Vec::new();
    for host in hosts.split(',') {
        if host.is_empty() {
            return Err(invalid(
                "the host list has an empty entry (hosts are separated by single commas: h1:p1,h2:p2)",
            ));
        }
        let one = format!("{head}{host}{tail}");
        if urls.contains(&one) {
            return Err(invalid(&format!("host {host} is listed twice")));
        }
        urls.push(one);
    }
    Ok(urls)
}

/// How a dialect tells that a host can take the pool's work: a fresh connection to it answers
/// this check with `true`.
pub(crate) type ReadyCheck<C> = for<'c> fn(&'c mut C) -> BoxFuture<'c, bool>;

/// The hosts of one pool and the one in use.
pub(crate) struct Hosts<DB: Database> {
    urls: Vec<String>,
    opts: Vec<<DB::Connection as Connection>::Options>,
    current: AtomicUsize,
    /// When the pool last moved to another host: connections older than that are closed.
    moved_at: Mutex<Instant>,
    ready: ReadyCheck<DB::Connection>,
    connect_timeout: Duration,
}

impl<DB: Database> Hosts<DB> {
    /// The hosts of `url`, each parsed by `parse`; with several, the first that answers and is
    /// `ready` is the one in use (an error when none is).
    pub(crate) async fn connect(
        url: &str,
        config: &BackendConfig,
        parse: fn(&str) -> Result<<DB::Connection as Connection>::Options>,
        ready: ReadyCheck<DB::Connection>,
    ) -> Result<Arc<Self>> {
        let urls = split_hosts(url)?;
        let opts = urls.iter().map(|u| parse(u)).collect::<Result<Vec<_>>>()?;
        let hosts = Hosts::new(urls, opts, ready, config.connect_timeout);
        if hosts.several() && hosts.start().await.is_none() {
            return Err(Error::Database {
                kind: DbErrorKind::ConnectionLost,
                source: format!(
                    "cannot connect to {}: no host of the list answers and is ready",
                    crate::redact_url(url)
                )
                .into(),
            });
        }
        Ok(hosts)
    }

    /// Pool options sized by `config` whose connections to a host the pool moved away from are
    /// closed rather than used (when acquired or released). A connection idle for
    /// [`PING_AFTER_IDLE`] or longer is pinged before use, and closed if the ping fails; one
    /// back from use a moment ago is not: sqlx's own test pings at every acquire, a round trip
    /// (and a server wake-up) on each claim of a busy worker.
    pub(crate) fn pool_options(self: &Arc<Self>, config: &BackendConfig) -> PoolOptions<DB> {
        let (acquired, released) = (self.clone(), self.clone());
        PoolOptions::new()
            .max_connections(config.max_connections.max(1))
            .acquire_timeout(config.acquire_timeout)
            .test_before_acquire(false)
            .before_acquire(move |conn: &mut DB::Connection, meta| {
                // A connection whose ROLLBACK failed still counts its transaction open (see
                // `sqlite::pool_options`): closed, not handed out.
                let fresh = !acquired.is_stale(&meta) && !conn.is_in_transaction();
                Box::pin(async move {
                    if fresh && meta.idle_for >= PING_AFTER_IDLE && conn.ping().await.is_err() {
                        return Ok(false);
                    }
                    Ok(fresh)
                })
            })
            .after_release(move |_conn, meta| {
                let fresh = !released.is_stale(&meta);
                Box::pin(async move { Ok(fresh) })
            })
    }

    /// The hosts of `urls` (single-host URLs, parsed into `opts` by the caller), starting with
    /// the first.
    fn new(
        urls: Vec<String>,
        opts: Vec<<DB::Connection as Connection>::Options>,
        ready: ReadyCheck<DB::Connection>,
        connect_timeout: Duration,
    ) -> Arc<Self> {
        Arc::new(Hosts {
            urls,
            opts,
            current: AtomicUsize::new(0),
            moved_at: Mutex::new(Instant::now()),
            ready,
            connect_timeout,
        })
    }

    /// More than one host: worth watching.
    pub(crate) fn several(&self) -> bool {
        self.urls.len() > 1
    }

    /// The options of the host in use.
    pub(crate) fn current_options(&self) -> <DB::Connection as Connection>::Options {
        self.opts[self.current.load(Ordering::Acquire)].clone()
    }

    /// The URL of the host in use (for messages: redact it).
    pub(crate) fn current_url(&self) -> &str {
        &self.urls[self.current.load(Ordering::Acquire)]
    }

    /// Whether a connection of this age was opened before the pool last moved (then it goes to
    /// a host no longer in use, and is closed rather than used).
    pub(crate) fn is_stale(&self, meta: &PoolConnectionMetadata) -> bool {
        self.several() && meta.age > self.moved_at.lock().expect("not poisoned").elapsed()
    }

    /// Whether host `i` answers within the connect timeout and is ready.
    async fn probe(&self, i: usize) -> bool {
        let check = async {
            let mut conn = self.opts[i].connect().await.ok()?;
            let ready = (self.ready)(&mut conn).await;
            conn.close().await.ok();
            Some(ready)
        };
        matches!(
            tokio::time::timeout(self.connect_timeout, check).await,
            Ok(Some(true))
        )
    }

    /// Chooses the first ready host, trying them in the list's order from the one in use
    /// (wrapping around); `None` when none is.
    async fn choose(&self) -> Option<usize> {
        let from = self.current.load(Ordering::Acquire);
        for step in 0..self.urls.len() {
            let i = (from + step) % self.urls.len();
            if self.probe(i).await {
                return Some(i);
            }
        }
        None
    }

    /// Makes host `i` the one new connections go to.
    fn move_to(&self, pool: &Pool<DB>, i: usize) {
        let from = self.current.swap(i, Ordering::AcqRel);
        if from == i {
            return;
        }
        pool.set_connect_options(self.opts[i].clone());
        *self.moved_at.lock().expect("not poisoned") = Instant::now();
        tracing::warn!(
            from = %crate::redact_url(&self.urls[from]),
            to = %crate::redact_url(&self.urls[i]),
            "backlog: the database host in use stopped answering or is not ready; moved to the next"
        );
    }

    /// Picks the first ready host for a new pool (`None`: none answered).
    async fn start(&self) -> Option<usize> {
        let i = self.choose().await?;
        self.current.store(i, Ordering::Release);
        Some(i)
    }
}

/// Watches the host in use of a pool with several hosts, every `every`, and moves the pool to
/// the next ready host when it fails; ends when the pool is closed.
pub(crate) fn watch<DB: Database>(pool: Pool<DB>, hosts: Arc<Hosts<DB>>, every: Duration) {
    if !hosts.several() {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if pool.is_closed() {
                return;
            }
            let current = hosts.current.load(Ordering::Acquire);
            if hosts.probe(current).await {
                continue;
            }
            match hosts.choose().await {
                Some(i) => hosts.move_to(&pool, i),
                None => tracing::warn!(
                    hosts = hosts.urls.len(),
                    "backlog: no database host answers and is ready; trying again"
                ),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_rotate() {
        let url = "mysql://root:p@w@h1:1,h2:2,h3:3/test?x=1";
        assert_eq!(rotate_hosts(url, 0), url);
        assert_eq!(
            rotate_hosts(url, 1),
            "mysql://root:p@w@h2:2,h3:3,h1:1/test?x=1"
        );
        assert_eq!(
            rotate_hosts(url, 5),
            "mysql://root:p@w@h3:3,h1:1,h2:2/test?x=1"
        );
        assert_eq!(rotate_hosts("postgres://h/db", 3), "postgres://h/db");
        assert_eq!(rotate_hosts("sqlite://x.db", 1), "sqlite://x.db");
    }

    #[test]
    fn one_url_per_host_in_order() {
        assert_eq!(
            split_hosts("mysql://root@a:1,b:2,c/test?x=1").unwrap(),
            [
                "mysql://root@a:1/test?x=1",
                "mysql://root@b:2/test?x=1",
                "mysql://root@c/test?x=1"
            ]
        );
        assert_eq!(
            split_hosts("postgres://u:p/w@d@h1,h2:5433").unwrap(),
            ["postgres://u:p/w@d@h1", "postgres://u:p/w@d@h2:5433"]
        );
        assert_eq!(
            split_hosts("postgres://h1,h2/db").unwrap(),
            ["postgres://h1/db", "postgres://h2/db"]
        );
        // One host: the URL as it is.
        assert_eq!(
            split_hosts("mysql://root@a:1/test").unwrap(),
            ["mysql://root@a:1/test"]
        );
    }

    #[test]
    fn empty_or_repeated_hosts_are_refused_without_the_password() {
        for bad in [
            "mysql://root:secret@a,,b/test",
            "mysql://root:secret@a,/test",
            "mysql://root:secret@,a/test",
            "mysql://root:secret@a:1,a:1/test",
        ] {
            let err = split_hosts(bad).unwrap_err().to_string();
            assert!(err.contains("host"), "{bad}: {err}");
            assert!(!err.contains("secret"), "{bad}: {err}");
        }
    }
}
