//! Driver errors translated, in one place, into backlog's error kinds.

use backlog_core::{DbErrorKind, Error};

/// Translates a sqlx error.
pub(crate) fn db(err: sqlx::Error) -> Error {
    let kind = classify(&err);
    if let sqlx::Error::Database(e) = &err {
        let code = e.code().unwrap_or_default();
        let msg = e.message();
        // undefined_table (PostgreSQL), ER_NO_SUCH_TABLE (MySQL), "no such table" (SQLite); and
        // a column a later version added: undefined_column, ER_BAD_FIELD_ERROR, "no such column"
        // (a build reading a schema older than its own: `backlog migrate`).
        if ["42P01", "1146", "42S02", "42703", "1054", "42S22"].contains(&code.as_ref())
            || msg.contains("no such table")
            || msg.contains("no such column")
        {
            return Error::SchemaOutdated {
                found: 0,
                expected: crate::SCHEMA_VERSION,
            };
        }
    }
    Error::Database {
        kind,
        source: Box::new(err),
    }
}

/// Whether the driver error behind a [`DbErrorKind::LockTimeout`] is PostgreSQL's
/// `lock_not_available` (55P03: a lock wait ran past `lock_timeout`), not a statement timeout
/// (57014), which the kind also covers.
pub(crate) fn lock_not_available(source: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    let code = (source.downcast_ref::<sqlx::Error>())
        .and_then(|e| e.as_database_error())
        .and_then(|e| e.code());
    code.as_deref() == Some("55P03")
}

fn classify(err: &sqlx::Error) -> DbErrorKind {
    match err {
        sqlx::Error::PoolTimedOut => DbErrorKind::PoolTimeout,
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => DbErrorKind::ConnectionLost,
        sqlx::Error::Database(e) => {
            let code = e.code().unwrap_or_default();
            // SQLite: a full disk (SQLITE_FULL), a file or file system that can only be read
            // (SQLITE_READONLY and its extended codes), a failed write (SQLITE_IOERR and its
            // extended codes). The connection still reads: an operator frees space or makes
            // the file writable, and writes resume without a restart.
            if matches!(sqlite_code(&**e), Some(13 | 8 | 10)) {
                return DbErrorKind::StorageUnavailable;
            }
            match &*code {
                // PostgreSQL's disk_full.
                "53100" => DbErrorKind::StorageUnavailable,
                // PostgreSQL SQLSTATEs.
                "40P01" => DbErrorKind::Deadlock,
                "40001" => DbErrorKind::SerializationFailure,
                "55P03" | "57014" => DbErrorKind::LockTimeout,
                "57P01" | "57P02" | "57P03" | "08000" | "08003" | "08006" => {
                    DbErrorKind::ConnectionLost
                }
                // A Galera node that is joining, donating or desynced answers 1047 "WSREP has
                // not yet prepared node for application use" (SQLSTATE 08S01, MySQL's
                // communication error): it is ready again within seconds, as a reconnecting
                // server is, so the call is retried (on the next host of a list, if any).
                "08S01" => DbErrorKind::ConnectionLost,
                // MySQL / MariaDB error numbers (sqlx reports the SQLSTATE for some).
                "1213" => DbErrorKind::Deadlock,
                "1205" | "3572" => DbErrorKind::LockTimeout,
                // SQLite: SQLITE_BUSY and SQLITE_LOCKED with their extended codes. A file that
                // cannot be opened (SQLITE_CANTOPEN, 14) stays `Other`: retrying does not help
                // until someone creates its directory or fixes its permissions.
                "5" | "6" | "261" | "517" | "262" => DbErrorKind::LockTimeout,
                _ => match e.kind() {
                    sqlx::error::ErrorKind::UniqueViolation => DbErrorKind::UniqueViolation,
                    sqlx::error::ErrorKind::CheckViolation
                    | sqlx::error::ErrorKind::NotNullViolation
                    | sqlx::error::ErrorKind::ForeignKeyViolation => {
                        DbErrorKind::ConstraintViolation
                    }
                    _ => {
                        let msg = e.message();
                        if msg.contains("Deadlock found") {
                            DbErrorKind::Deadlock
                        } else if msg.contains("Lock wait timeout") || msg.contains("locked") {
                            DbErrorKind::LockTimeout
                        } else {
                            DbErrorKind::Other
                        }
                    }
                },
            }
        }
        _ => DbErrorKind::Other,
    }
}

/// Extension to translate sqlx results.
pub(crate) trait DbResultExt<T> {
    /// Maps the error with [`db`].
    fn db(self) -> Result<T, Error>;
}

impl<T> DbResultExt<T> for Result<T, sqlx::Error> {
    fn db(self) -> Result<T, Error> {
        self.map_err(db)
    }
}

/// The primary result code (the low byte of the extended one) of a SQLite error.
pub(crate) fn sqlite_code(e: &dyn sqlx::error::DatabaseError) -> Option<i32> {
    e.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    Some(e.code()?.parse::<i32>().ok()? & 0xff)
}

/// What SQLite's terse answers to opening a file likely mean, said after them.
fn sqlite_hint(err: &sqlx::Error) -> &'static str {
    let sqlx::Error::Database(e) = err else {
        return "";
    };
    match sqlite_code(&**e) {
        // SQLITE_CANTOPEN: the file, or the -wal and -shm files SQLite creates beside it.
        Some(14) => {
            " (SQLite creates the -wal and -shm files beside the database: is its directory \
             missing, or read-only?)"
        }
        // SQLITE_READONLY: opened, but only to read.
        Some(8) => {
            " (the database can only be read: a read-only file system, or no permission to \
             write the file or its directory; add ?mode=ro to the URL to open it to read only)"
        }
        _ => "",
    }
}

/// Translates a connection failure, naming the (redacted) URL.
pub(crate) fn connect_error(url: &str, err: sqlx::Error) -> Error {
    match err {
        sqlx::Error::Configuration(e) => Error::DatabaseUrlInvalid {
            url: crate::redact_url(url),
            reason: e.to_string(),
        },
        other => Error::Database {
            // The server (or SQLite's file) answered with an error of its own, such as a file
            // that is not a database: that is no lost connection, and retrying will not help.
            kind: match &other {
                sqlx::Error::Database(_) => classify(&other),
                _ => DbErrorKind::ConnectionLost,
            },
            source: format!(
                "cannot connect to {}: {other}{}",
                crate::redact_url(url),
                sqlite_hint(&other)
            )
            .into(),
        },
    }
}

/// A step of connecting (`what`), bounded by `limit`: a server or network that stalls during
/// the handshake fails it as a lost connection, naming the (redacted) URL.
pub(crate) async fn connect_within<T>(
    url: &str,
    limit: std::time::Duration,
    step: impl Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(limit, step).await {
        Ok(done) => done.map_err(|e| connect_error(url, e)),
        Err(_) => Err(Error::Database {
            kind: DbErrorKind::ConnectionLost,
            source: format!(
                "cannot connect to {}: no answer within {limit:?} (connect_timeout)",
                crate::redact_url(url)
            )
            .into(),
        }),
    }
}
