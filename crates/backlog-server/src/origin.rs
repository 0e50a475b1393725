//! What a web page of another site can make a browser send: refused.
//!
//! - **Cross-site requests** (CSRF). A page on any site can make the browser send a `POST` to
//!   the server (a plain HTML form, or `fetch` in `no-cors` mode), and on loopback without tokens
//!   every request is admin. Every request that changes something (any method but `GET`, `HEAD`
//!   and `OPTIONS`) must come from the server's own pages or from a program that is not a
//!   browser: `Sec-Fetch-Site` is `same-origin` or `none` when the browser sends it, and
//!   `Origin`, when sent, names the host the request went to. Programs (curl, the clients)
//!   send neither header and are not affected. A page on another port of `localhost` is
//!   *same-site*, not same-origin: refused too.
//! - **DNS rebinding.** A page whose own name an attacker points at 127.0.0.1 is same-origin to
//!   the browser but names its own host in `Host`. Only the names the listen address stands for
//!   are answered (`localhost` and loopback addresses on loopback, the address itself
//!   otherwise), plus those the operator names for a reverse proxy
//!   ([`ServerConfig::allowed_hosts`](crate::ServerConfig::allowed_hosts)). On an unspecified
//!   address (`0.0.0.0`, `[::]`, which needs tokens) any name is answered unless some are named.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The Host names a server answers to.
#[derive(Debug, Clone)]
pub(crate) struct HostNames {
    listen: IpAddr,
    /// Lowercase, without a trailing dot or a port.
    named: Vec<String>,
}

impl HostNames {
    pub(crate) fn new(listen: SocketAddr, named: &[String]) -> Self {
        HostNames {
            listen: listen.ip(),
            named: named.iter().map(|n| normalize(n)).collect(),
        }
    }

    /// Whether a request whose `Host` header names `name` (port removed) is for this server.
    fn allows(&self, name: &str) -> bool {
        let name = normalize(name);
        if self.named.contains(&name) {
            return true;
        }
        let ip = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(&name)
            .parse::<IpAddr>()
            .ok();
        match ip {
            // An address literal cannot be rebound: it is the one the client dialled.
            Some(ip) => {
                ip == self.listen
                    || self.listen.is_unspecified()
                    || (self.listen.is_loopback() && ip.is_loopback())
            }
            None if self.listen.is_loopback() => name == "localhost",
            None => self.listen.is_unspecified() && self.named.is_empty(),
        }
    }
}

fn normalize(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// `host[:port]` without the port (IPv6 literals keep their brackets).
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// Why a request that changes something is refused as cross-site, if it is.
fn cross_site(headers: &HeaderMap) -> Option<String> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return match site {
            "same-origin" | "none" => None,
            other => Some(format!(
                "the browser says it comes from a page of another origin ({other})"
            )),
        };
    }
    let origin = text(header::ORIGIN.as_str())?;
    let host = text(header::HOST.as_str()).unwrap_or_default();
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match authority {
        Some(a) if !host.is_empty() && a.eq_ignore_ascii_case(host) => None,
        _ => Some(format!("its Origin ({origin}) is not this server ({host})")),
    }
}

/// The middleware: refuses requests for other host names (421) and cross-site requests that
/// would change something (403), before authentication and before any handler runs.
pub(crate) async fn guard(
    State(names): State<Arc<HostNames>>,
    req: Request,
    next: Next,
) -> Response {
    let headers = req.headers();
    if let Some(host) = headers.get(header::HOST) {
        let name = host.to_str().map(host_of).unwrap_or("");
        if !names.allows(name) {
            return ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "host_not_allowed",
                format!(
                    "this server does not answer for host {:?}; name it with --allow-host \
                     when a proxy forwards it",
                    String::from_utf8_lossy(host.as_bytes())
                ),
            )
            .into_response();
        }
    }
    let reads = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !reads && let Some(why) = cross_site(headers) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site_refused",
            format!("refused a cross-site request: {why}"),
        )
        .into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(listen: &str, named: &[&str]) -> HostNames {
        let named: Vec<String> = named.iter().map(|s| s.to_string()).collect();
        HostNames::new(listen.parse().unwrap(), &named)
    }

    #[test]
    fn loopback_answers_its_own_names_only() {
        let n = names("127.0.0.1:8080", &[]);
        for ok in ["localhost", "LOCALHOST.", "127.0.0.1", "127.0.0.2", "[::1]"] {
            assert!(n.allows(ok), "{ok}");
        }
        for bad in [
            "rebind.attacker.example",
            "10.0.0.1",
            "",
            "localhost.attacker.example",
        ] {
            assert!(!n.allows(bad), "{bad}");
        }
        let n = names("127.0.0.1:8080", &["queue.example.com"]);
        assert!(n.allows("Queue.Example.COM"));
        assert!(!n.allows("other.example.com"));
    }

    #[test]
    fn other_addresses_answer_their_literal_and_named_hosts() {
        let n = names("192.0.2.7:80", &["backlog.internal"]);
        assert!(n.allows("192.0.2.7"));
        assert!(n.allows("backlog.internal"));
        assert!(!n.allows("localhost"));
        assert!(!n.allows("evil.example"));
        let any = names("0.0.0.0:80", &[]);
        assert!(any.allows("whatever.example"));
        let some = names("[::]:80", &["a.example"]);
        assert!(some.allows("a.example"));
        assert!(some.allows("[2001:db8::1]"));
        assert!(!some.allows("b.example"));
    }

    #[test]
    fn hosts_lose_their_ports() {
        assert_eq!(host_of("localhost:8080"), "localhost");
        assert_eq!(host_of("[::1]:8080"), "[::1]");
        assert_eq!(host_of("[::1]"), "[::1]");
        assert_eq!(host_of("example.com"), "example.com");
    }

    #[test]
    fn cross_site_is_told_by_fetch_metadata_then_origin() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        assert!(
            cross_site(&headers(&[])).is_none(),
            "a program sends neither"
        );
        assert!(cross_site(&headers(&[("sec-fetch-site", "same-origin")])).is_none());
        assert!(cross_site(&headers(&[("sec-fetch-site", "none")])).is_none());
        for site in ["same-site", "cross-site", "bogus"] {
            let h = [
                ("sec-fetch-site", site),
                ("origin", "http://localhost:8080"),
            ];
            let h = headers(&h);
            assert!(cross_site(&h).is_some(), "{site}");
        }
        let host = ("host", "localhost:8080");
        assert!(cross_site(&headers(&[host, ("origin", "http://localhost:8080")])).is_none());
        assert!(cross_site(&headers(&[host, ("origin", "http://localhost:9999")])).is_some());
        assert!(cross_site(&headers(&[host, ("origin", "null")])).is_some());
        assert!(cross_site(&headers(&[("origin", "http://localhost:8080")])).is_some());
    }
}
