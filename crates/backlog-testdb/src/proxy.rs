//! A TCP proxy on loopback between a test's clients and its database server, for network
//! faults: added latency, a stall (connections stay open, nothing passes either way, no FIN:
//! what a partition or a frozen middlebox looks like to both ends), healing (what was held back
//! is delivered, late), and cutting every connection at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Conditions {
    /// Added before each chunk is passed on, each way.
    latency: Duration,
    /// Nothing passes while true.
    stalled: bool,
    /// Bumped to cut every connection open at the time.
    generation: u64,
}

/// The proxy; it stops (and drops every connection) when dropped.
pub struct Proxy {
    addr: SocketAddr,
    conditions: watch::Sender<Conditions>,
    accepted: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `target`.
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (conditions, watching) = watch::channel(Conditions {
            latency: Duration::ZERO,
            stalled: false,
            generation: 0,
        });
        let accepted = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let (count, stopping) = (accepted.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let client = tokio::select! {
                    _ = stopping.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => client,
                        Err(_) => continue,
                    },
                };
                count.fetch_add(1, Ordering::Relaxed);
                let (watching, stopping) = (watching.clone(), stopping.clone());
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let generation = watching.borrow().generation;
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let cut = stopping.child_token();
                    let up = pipe(cr, sw, watching.clone(), generation, cut.clone());
                    let down = pipe(sr, cw, watching, generation, cut.clone());
                    // Either direction ending (EOF, error, cut) ends both: dropping the halves
                    // closes the sockets.
                    tokio::select! { _ = up => {}, _ = down => {} }
                    cut.cancel();
                });
            }
        });
        Proxy {
            addr,
            conditions,
            accepted,
            stop,
        }
    }

    /// Starts a proxy in front of the server a database URL names.
    pub async fn for_url(url: &str) -> Proxy {
        let u = url::Url::parse(url).unwrap();
        let host = u.host_str().unwrap();
        let port = u.port_or_known_default().unwrap();
        let target = tokio::net::lookup_host((host, port))
            .await
            .unwrap()
            .next()
            .unwrap();
        Proxy::start(target).await
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        let mut u = url::Url::parse(url).unwrap();
        u.set_host(Some("127.0.0.1")).unwrap();
        u.set_port(Some(self.addr.port())).unwrap();
        u.to_string()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Adds `latency` to every chunk passed on, each way (so a round trip gains twice it).
    pub fn set_latency(&self, latency: Duration) {
        self.conditions.send_modify(|c| c.latency = latency);
    }

    /// Holds everything back, both ways, on every connection (new ones too), without closing
    /// any: to the client the server has gone silent, and to the server the client has.
    pub fn stall(&self) {
        self.conditions.send_modify(|c| c.stalled = true);
    }

    /// Lets traffic pass again; what was held back is delivered now.
    pub fn heal(&self) {
        self.conditions.send_modify(|c| c.stalled = false);
    }

    /// Closes every connection open now (both ends see them closed); new ones are let through.
    pub fn cut_all(&self) {
        self.conditions.send_modify(|c| c.generation += 1);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Copies `from` to `to` under the proxy's conditions until EOF, an error, a cut of this
/// connection's generation, or `stop`.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut conditions: watch::Receiver<Conditions>,
    generation: u64,
    stop: CancellationToken,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut cut = conditions.clone();
    let cut_off = async move {
        let _ = cut.wait_for(|c| c.generation != generation).await;
    };
    tokio::pin!(cut_off);
    loop {
        let n = tokio::select! {
            _ = stop.cancelled() => return,
            _ = &mut cut_off => return,
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
        };
        // Hold the chunk while stalled (a cut still ends the connection).
        let passed = async {
            let now = conditions.wait_for(|c| !c.stalled).await.map(|c| *c);
            if let Ok(c) = now
                && !c.latency.is_zero()
            {
                tokio::time::sleep(c.latency).await;
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = &mut cut_off => return,
            _ = passed => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
