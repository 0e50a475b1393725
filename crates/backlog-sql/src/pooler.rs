//! PostgreSQL behind a pooler in transaction pooling mode (PgBouncer's `pool_mode =
//! transaction`, and poolers that work the same way): the pooler lends a server connection to a
//! client for one transaction at a time, so nothing may outlive a transaction on it.
//!
//! What backlog does in that mode (`BackendConfig::pg_transaction_pooler`, or the URL parameter
//! `pooler=transaction`):
//! - every statement is unnamed (sqlx's `persistent(false)`): sqlx's named statements
//!   (`sqlx_s_1`, …) would stay prepared on a server connection that other clients use next,
//!   where a statement of the same name runs with their parameters or fails;
//! - every statement is in a transaction: sqlx sends an unnamed statement in two round trips
//!   (Parse, Describe, Sync; then Bind, Execute, Sync), and between them an idle client's
//!   server connection may go to another client. A statement backlog would send on its own gets
//!   a `BEGIN` and a `COMMIT` ([`on_pool!`]);
//! - no session state: no startup `options` (which PgBouncer refuses or drops). The plan cache
//!   mode is set in each transaction instead (`SET LOCAL`, in the round trip of its `BEGIN`:
//!   `PgBackend::tx`), and without the setting that keeps the notification trigger quiet the
//!   trigger sends the wake-ups; locks are transaction-scoped (they already are);
//! - LISTEN on a direct connection (`BackendConfig::listen_url`, or the URL parameter
//!   `listen_url=`): through the pooler a notification would reach whichever client next holds
//!   the server connection. Without one, workers poll.
//!
//! Whether statements are unnamed is a task-local flag that [`scope`] sets around each call to
//! the backend ([`Deadline`](crate::Deadline) frames every call of a backend in that mode) and
//! that the catalog's statements read when they are built.

use std::future::Future;

tokio::task_local! {
    static UNNAMED: bool;
}

/// Whether statements built now are to be unnamed: inside a [`scope`] that turned it on.
pub(crate) fn unnamed() -> bool {
    UNNAMED.try_with(|u| *u).unwrap_or(false)
}

/// Runs `call` with the statements it builds unnamed when `on`.
pub(crate) async fn scope<T>(on: bool, call: impl Future<Output = T>) -> T {
    match on {
        true => UNNAMED.scope(true, call).await,
        false => call.await,
    }
}

/// Runs a statement that would go straight to the pool (`$q.$method(&pool)`): in a transaction
/// of its own when the dialect's connections go through a transaction pooler (see the module).
/// Expanded where `$self` is a [`Dialect`](crate::engine::Dialect) with a `pool` field; the
/// result is sqlx's.
macro_rules! on_pool {
    ($self:expr, $q:expr, $method:ident) => {
        async {
            if $crate::engine::Dialect::tx_per_statement($self) {
                let mut tx = $self.tx().await?;
                let out = $q.$method(&mut *tx).await?;
                tx.commit().await?;
                Ok::<_, sqlx::Error>(out)
            } else {
                $q.$method(&$self.pool).await
            }
        }
        .await
    };
}

pub(crate) use on_pool;

/// The URL parameters backlog reads from a PostgreSQL URL, taken out of it before sqlx parses
/// the rest (sqlx would warn about them).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PgUrlParams {
    /// `pooler=transaction` (or `pooler=none`).
    pub transaction_pooler: Option<bool>,
    /// `listen_url=postgres://…` (percent-encoded or not: it runs to the next `&`).
    pub listen_url: Option<String>,
}

/// Splits `pooler=` and `listen_url=` off a PostgreSQL URL: the URL without them, and their
/// values. A value that is neither `transaction` nor `none`, a listen URL that is not a
/// `postgres://` one, or either given twice is refused.
pub(crate) fn take_url_params(url: &str) -> backlog_core::Result<(String, PgUrlParams)> {
    let invalid = |reason: String| backlog_core::Error::DatabaseUrlInvalid {
        url: crate::redact_url(url),
        reason,
    };
    let mut found = PgUrlParams::default();
    // Not by finding the query after the hosts (the hosts follow the last `@`, and a listen URL
    // in the query may hold one): from the first of these parameters on.
    let starts: Vec<usize> = ["?pooler=", "&pooler=", "?listen_url=", "&listen_url="]
        .iter()
        .filter_map(|p| url.find(p))
        .collect();
    let Some(&first) = starts.iter().min() else {
        return Ok((url.to_owned(), found));
    };
    let (base, query) = url.split_at(first);
    // The parameters from the first of ours on; the ones before it stay where they are.
    let mut kept: Vec<&str> = vec![];
    for pair in query[1..].split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "pooler" => {
                if found.transaction_pooler.is_some() {
                    return Err(invalid("the parameter pooler is given twice".into()));
                }
                found.transaction_pooler = Some(match value {
                    "transaction" => true,
                    "none" => false,
                    other => {
                        return Err(invalid(format!(
                            "pooler={other}: expected pooler=transaction (a pooler in transaction \
                             pooling mode, such as PgBouncer's pool_mode = transaction) or \
                             pooler=none"
                        )));
                    }
                });
            }
            "listen_url" => {
                if found.listen_url.is_some() {
                    return Err(invalid("the parameter listen_url is given twice".into()));
                }
                let decoded = percent_decode(value);
                if !matches!(crate::url_scheme(&decoded), Ok(crate::UrlScheme::Postgres)) {
                    return Err(invalid(
                        "listen_url must be a postgres:// URL that reaches the server directly \
                         (not through the pooler)"
                            .into(),
                    ));
                }
                found.listen_url = Some(decoded);
            }
            _ => kept.push(pair),
        }
    }
    // Whether the part left has a query already: a `?` after the hosts (a password, before the
    // last `@`, may hold one).
    let hosts_at = base.rfind('@').map_or(0, |at| at + 1);
    let has_query = base[hosts_at..].contains('?');
    let mut rest = base.to_owned();
    for (i, pair) in kept.iter().enumerate() {
        let sep = if i == 0 && !has_query { '?' } else { '&' };
        rest.push(sep);
        rest.push_str(pair);
    }
    Ok((rest, found))
}

/// `%XX` escapes decoded (a listen URL may be given encoded, as a query value should be).
fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("v={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooler_parameters_come_off_the_url() {
        let (rest, p) = take_url_params("postgres://u@h:6432/db?pooler=transaction").unwrap();
        assert_eq!(rest, "postgres://u@h:6432/db");
        assert_eq!(p.transaction_pooler, Some(true));
        let (rest, p) = take_url_params(
            "postgres://u:p?w@h:6432/db?sslmode=disable&pooler=transaction\
             &listen_url=postgres://u:p@h:5432/db&application_name=x",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:p?w@h:6432/db?sslmode=disable&application_name=x"
        );
        let (rest, _) =
            take_url_params("postgres://u:p?w@h/db?pooler=transaction&sslmode=disable").unwrap();
        assert_eq!(rest, "postgres://u:p?w@h/db?sslmode=disable");
        assert_eq!(p.listen_url.as_deref(), Some("postgres://u:p@h:5432/db"));
        let (_, p) =
            take_url_params("postgres://h/db?listen_url=postgres%3A%2F%2Fu%40h%3A5432%2Fdb")
                .unwrap();
        assert_eq!(p.listen_url.as_deref(), Some("postgres://u@h:5432/db"));
        let (rest, p) = take_url_params("postgres://h/db?application_name=x").unwrap();
        assert_eq!(
            (rest.as_str(), p),
            ("postgres://h/db?application_name=x", PgUrlParams::default())
        );
    }

    #[test]
    fn bad_pooler_parameters_are_refused() {
        for (url, says) in [
            (
                "postgres://h/db?pooler=session",
                "expected pooler=transaction",
            ),
            ("postgres://h/db?pooler=", "expected pooler=transaction"),
            (
                "postgres://h/db?pooler=none&pooler=transaction",
                "given twice",
            ),
            (
                "postgres://h/db?listen_url=mysql://h/db",
                "must be a postgres://",
            ),
            ("postgres://h/db?listen_url=", "must be a postgres://"),
        ] {
            let err = take_url_params(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
    }
}
