//! Bearer tokens and their scopes.
//!
//! A token is a secret a client sends as `Authorization: Bearer SECRET`. The server keeps only
//! each secret's SHA-256 and compares digests in constant time; secrets are never logged. Each
//! token has a name (recorded as the actor of admin actions) and one scope:
//!
//! - `read`: inspect jobs, queues, stats and metrics;
//! - `produce`: enqueue, and the worker protocol (claim, heartbeat, complete, fail);
//! - `admin`: everything.
//!
//! With no token configured the server answers every request as `admin` (the actor is
//! `local`), and refuses to listen on anything but loopback.

use std::fmt;
use std::str::FromStr;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::error::{ApiError, ErrorBody};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Inspect.
    Read,
    /// Enqueue and the worker protocol.
    Produce,
    /// Everything.
    Admin,
}

impl Scope {
    /// Whether a token of this scope may do what `needed` names.
    pub fn allows(self, needed: Scope) -> bool {
        self == Scope::Admin || self == needed
    }

    /// The scope's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Produce => "produce",
            Scope::Admin => "admin",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = TokenConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Scope::Read),
            "produce" => Ok(Scope::Produce),
            "admin" => Ok(Scope::Admin),
            other => Err(TokenConfigError(format!(
                "unknown scope {other:?} (expected read, produce or admin)"
            ))),
        }
    }
}

/// A token list that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("invalid token list: {0}")]
pub struct TokenConfigError(pub String);

/// Shortest secret accepted.
pub const MIN_SECRET_LEN: usize = 16;

#[derive(Clone)]
struct Entry {
    name: String,
    scope: Scope,
    digest: [u8; 32],
}

/// The configured tokens, as digests.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<Entry>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names and scopes only: never the digests.
        f.debug_list()
            .entries(self.entries.iter().map(|e| (&e.name, e.scope)))
            .finish()
    }
}

/// The SHA-256 of a secret, as the `sha256:HEX` form a token list may hold instead of the secret.
pub fn hash_secret(secret: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(secret.as_bytes())))
}

/// A new random secret: 32 bytes, hex.
pub fn new_secret() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:@-".contains(c))
}

impl Tokens {
    /// Reads a token list: one token per line (or per comma), each `NAME SCOPE SECRET` where
    /// SECRET is the secret itself or `sha256:HEX` of it; blank lines and `#` comments are
    /// skipped (a comment runs to the end of its line, commas included). Names are unique.
    pub fn parse(text: &str) -> Result<Self, TokenConfigError> {
        let mut entries: Vec<Entry> = vec![];
        let uncommented = text
            .lines()
            .flat_map(|line| line.split('#').next().unwrap_or("").split(','));
        for (n, line) in uncommented.enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let at = |msg: String| TokenConfigError(format!("entry {}: {msg}", n + 1));
            let parts: Vec<&str> = line.split_whitespace().collect();
            let [name, scope, secret] = parts[..] else {
                return Err(at("expected NAME SCOPE SECRET".into()));
            };
            if !valid_name(name) {
                return Err(at(format!(
                    "invalid token name {name:?} (1-64 of A-Z a-z 0-9 _ . : @ -)"
                )));
            }
            if entries.iter().any(|e| e.name == name) {
                return Err(at(format!("token name {name:?} is used twice")));
            }
            let scope: Scope = scope.parse().map_err(|e: TokenConfigError| at(e.0))?;
            let digest = match secret.strip_prefix("sha256:") {
                Some(h) => {
                    let bytes = hex::decode(h)
                        .ok()
                        .filter(|b| b.len() == 32)
                        .ok_or_else(|| at("sha256: needs 64 hex digits".into()))?;
                    bytes.try_into().expect("32 bytes")
                }
                None if secret.len() < MIN_SECRET_LEN => {
                    return Err(at(format!(
                        "the secret of {name:?} is shorter than {MIN_SECRET_LEN} characters"
                    )));
                }
                None => Sha256::digest(secret.as_bytes()).into(),
            };
            if let Some(same) = entries.iter().find(|e| e.digest == digest) {
                return Err(at(format!(
                    "token {name:?} has the same secret as {:?}: each token needs its own",
                    same.name
                )));
            }
            entries.push(Entry {
                name: name.to_owned(),
                scope,
                digest,
            });
        }
        Ok(Tokens { entries })
    }

    /// True when no token is configured (the server then runs open, on loopback only).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The token a secret belongs to: its name and scope. Every entry is compared, in constant
    /// time, whether or not an earlier one matched.
    pub fn check(&self, secret: &str) -> Option<(String, Scope)> {
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let mut found = None;
        for e in &self.entries {
            if bool::from(e.digest.ct_eq(&digest)) {
                found = Some((e.name.clone(), e.scope));
            }
        }
        found
    }
}

/// Who made a request: the token's name and scope.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name (`local` when the server runs without tokens).
    pub name: String,
    /// Its scope.
    pub scope: Scope,
}

impl Caller {
    /// The caller, if allowed to do what `needed` names; 403 otherwise.
    pub fn require(self, needed: Scope) -> Result<Caller, ApiError> {
        if self.scope.allows(needed) {
            Ok(self)
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "token {:?} has scope {}; this needs {needed}",
                    self.name, self.scope
                ),
            ))
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if state.tokens.is_empty() {
            return Ok(Caller {
                name: "local".into(),
                scope: Scope::Admin,
            });
        }
        let unauthorized = |msg: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", msg);
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("send a token: Authorization: Bearer TOKEN"))?;
        // The scheme is case-insensitive (RFC 9110 section 11.1).
        let secret = header
            .to_str()
            .ok()
            .and_then(|h| h.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, secret)| secret.trim())
            .filter(|secret| !secret.is_empty())
            .ok_or_else(|| unauthorized("the Authorization header must be `Bearer TOKEN`"))?;
        let (name, scope) = state
            .tokens
            .check(secret)
            .ok_or_else(|| unauthorized("unknown token"))?;
        Ok(Caller { name, scope })
    }
}

/// Who the caller is, as `/api/v1/me` answers.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct MeView {
    /// The token's name (`local` when the server runs without tokens).
    pub name: String,
    /// Its scope: what it may do.
    pub scope: Scope,
}

/// Who this token is and what it may do (any valid token; without tokens configured, `local`
/// and `admin`). The dashboard asks it to know which actions to offer.
#[utoipa::path(get, path = "/api/v1/me", tag = "ops",
    responses((status = 200, body = MeView), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn me(who: Caller) -> axum::Json<MeView> {
    axum::Json(MeView {
        name: who.name,
        scope: who.scope,
    })
}

macro_rules! scoped {
    ($(#[$doc:meta])* $name:ident, $scope:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name(pub Caller);

        impl FromRequestParts<AppState> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut Parts,
                state: &AppState,
            ) -> Result<Self, ApiError> {
                Caller::from_request_parts(parts, state)
                    .await?
                    .require($scope)
                    .map($name)
            }
        }
    };
}

scoped!(
    /// A caller with the `read` scope (or `admin`).
    Reader,
    Scope::Read
);
scoped!(
    /// A caller with the `produce` scope (or `admin`).
    Producer,
    Scope::Produce
);
scoped!(
    /// A caller with the `admin` scope.
    Admin,
    Scope::Admin
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_and_check_by_digest() {
        let t = Tokens::parse(&format!(
            "# ops\nops admin 0123456789abcdef0123\nci produce {}, viewer read viewer-secret-123456",
            hash_secret("ci-secret-ci-secret")
        ))
        .unwrap();
        assert_eq!(
            t.check("0123456789abcdef0123"),
            Some(("ops".into(), Scope::Admin))
        );
        assert_eq!(
            t.check("ci-secret-ci-secret"),
            Some(("ci".into(), Scope::Produce))
        );
        assert_eq!(
            t.check("viewer-secret-123456").map(|x| x.1),
            Some(Scope::Read)
        );
        assert_eq!(t.check("nope"), None);
        assert!(!format!("{t:?}").contains("0123"), "no secrets in Debug");
    }

    #[test]
    fn bad_token_lists_are_refused() {
        for (text, why) in [
            ("ops admin", "expected NAME SCOPE SECRET"),
            ("ops root 0123456789abcdef0123", "unknown scope"),
            ("ops admin short", "shorter than 16"),
            ("ops admin sha256:abcd", "64 hex digits"),
            ("o/ps admin 0123456789abcdef0123", "invalid token name"),
            (
                "a read 0123456789abcdef0123\na read 0123456789abcdef0124",
                "used twice",
            ),
            (
                "a read 0123456789abcdef0123\nb admin 0123456789abcdef0123",
                "the same secret as \"a\"",
            ),
        ] {
            let e = Tokens::parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        assert!(Tokens::parse("\n# nothing\n").unwrap().is_empty());
        // A comment runs to the end of its line, commas and all; commas still part entries.
        let t = Tokens::parse(
            "# one a line, or several a line\na read 0123456789abcdef0123, b admin 0123456789abcdef0124 # two, here",
        )
        .unwrap();
        assert_eq!(
            t.check("0123456789abcdef0124")
                .map(|(name, _)| name)
                .as_deref(),
            Some("b")
        );
    }

    #[test]
    fn scopes_allow_what_they_name() {
        assert!(Scope::Admin.allows(Scope::Read));
        assert!(Scope::Admin.allows(Scope::Produce));
        assert!(Scope::Produce.allows(Scope::Produce));
        assert!(!Scope::Produce.allows(Scope::Read));
        assert!(!Scope::Read.allows(Scope::Admin));
    }
}
