//! The SQL catalog: every statement backlog sends, one file each under `queries/<dialect>/`,
//! written out in full with its parameters declared (`-- @param NAME: TYPE`). `build.rs` turns
//! each file into one function of [`postgres`], [`mysql`] or [`sqlite`] that takes the declared
//! parameters and binds them in the order the statement's placeholders take them, so no call
//! site keeps a `.bind()` chain in step with a file. `docs/catalog/<dialect>.md` shows every
//! statement; `tests/catalog.rs` checks it is current.
//!
//! The only text a statement gains at run time is the one its file declares: a `/*MARKER*/` of
//! a list (`?, ?, …`) or of rows (`(?, …), (?, …)`), on MySQL and SQLite, which have no arrays.

use sqlx::error::BoxDynError;
use sqlx::{Arguments, Database, Encode, IntoArguments, SqlSafeStr, SqlStr, Type};

/// The statements of each dialect, generated from `queries/<dialect>/*.sql`.
pub(crate) mod postgres {
    include!(concat!(env!("OUT_DIR"), "/catalog_postgres.rs"));
}

/// See [`postgres`].
pub(crate) mod mysql {
    include!(concat!(env!("OUT_DIR"), "/catalog_mysql.rs"));
}

/// See [`postgres`].
pub(crate) mod sqlite {
    include!(concat!(env!("OUT_DIR"), "/catalog_sqlite.rs"));
}

/// One statement of the catalog, as the rendered catalog shows it.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The file's name without `.sql`.
    pub name: &'static str,
    /// Each declared parameter: name, Rust type, and how it binds (`param`, `list /*M*/`,
    /// `rows /*M*/`).
    pub params: &'static [(&'static str, &'static str, &'static str)],
    /// The parameter bound at each placeholder, in order (numbered dialects: `$1`, `$2`, …).
    pub binds: &'static [&'static str],
    /// The statement as it runs.
    pub text: &'static str,
}

/// Every statement of a dialect (`"postgres"`, `"mysql"` or `"sqlite"`), for the rendered
/// catalog and its test.
pub fn entries(dialect: &str) -> &'static [Entry] {
    match dialect {
        "postgres" => postgres::CATALOG,
        "mysql" => mysql::CATALOG,
        "sqlite" => sqlite::CATALOG,
        _ => &[],
    }
}

/// A statement with its values bound: run it with [`query`](Stmt::query),
/// [`scalar`](Stmt::scalar) or [`as_`](Stmt::as_). An error encoding a value is returned when
/// the statement runs.
pub(crate) struct Stmt<DB: Database> {
    text: SqlStr,
    args: Result<DB::Arguments, BoxDynError>,
}

impl<DB: Database + sqlx_core::database::HasStatementCache> Stmt<DB>
where
    DB::Arguments: IntoArguments<DB>,
{
    // Each is a prepared statement that sqlx caches per connection, or an unnamed one inside a
    // call to a backend behind a transaction pooler (see `pooler`).

    /// The statement, for rows.
    pub fn query<'q>(self) -> sqlx::query::Query<'q, DB, DB::Arguments> {
        let q = sqlx_core::query::query_with_result(self.text, self.args);
        q.persistent(!crate::pooler::unnamed())
    }

    /// The statement, for its first column.
    pub fn scalar<'q, O>(self) -> sqlx::query::QueryScalar<'q, DB, O, DB::Arguments>
    where
        (O,): for<'r> sqlx::FromRow<'r, DB::Row>,
    {
        let q = sqlx_core::query_scalar::query_scalar_with_result(self.text, self.args);
        q.persistent(!crate::pooler::unnamed())
    }

    /// The statement, for rows read as `O`.
    pub fn as_<'q, O>(self) -> sqlx::query::QueryAs<'q, DB, O, DB::Arguments>
    where
        O: for<'r> sqlx::FromRow<'r, DB::Row>,
    {
        let q = sqlx_core::query_as::query_as_with_result(self.text, self.args);
        q.persistent(!crate::pooler::unnamed())
    }
}

impl<DB: Database> Stmt<DB> {
    /// The statement under `prefix` (such as `EXPLAIN (ANALYZE, BUFFERS)`), with the same values.
    pub(crate) fn prefixed(self, prefix: &str) -> Stmt<DB> {
        let text = format!("{prefix} {}", self.text.as_str());
        Stmt {
            text: sqlx::AssertSqlSafe(text).into_sql_str(),
            args: self.args,
        }
    }
}

/// The values of a statement as the generated functions add them.
pub(crate) struct Args<DB: Database> {
    args: Result<DB::Arguments, BoxDynError>,
}

impl<DB: Database> Default for Args<DB> {
    fn default() -> Self {
        Args {
            args: Ok(DB::Arguments::default()),
        }
    }
}

impl<DB: Database> Args<DB> {
    /// Adds one value (the first error is kept).
    pub fn add<'t, T: Encode<'t, DB> + Type<DB>>(&mut self, value: T) {
        if let Ok(a) = &mut self.args
            && let Err(e) = a.add(value)
        {
            self.args = Err(e);
        }
    }

    /// Adds a list's values, padded as [`expand_list`] pads its placeholders.
    pub fn list<'t, T>(&mut self, values: &'t [T])
    where
        &'t T: Encode<'t, DB> + Type<DB>,
    {
        for v in padded(values) {
            self.add(v);
        }
    }

    /// The statement of a fixed text.
    pub fn finish(self, text: &'static str) -> Stmt<DB> {
        Stmt {
            text: text.into_sql_str(),
            args: self.args,
        }
    }

    /// The statement of a text with expanded lists or rows.
    pub fn finish_owned(self, text: String) -> Stmt<DB> {
        Stmt {
            text: sqlx::AssertSqlSafe(text).into_sql_str(),
            args: self.args,
        }
    }
}

/// `text` with `marker` replaced by `n` `?` placeholders, padded to the next power of two.
///
/// Lists come in a few lengths so that each statement has a few texts, not one per length. sqlx
/// keeps a bounded cache of prepared statements per connection; with one text per length it
/// overflows, and every eviction sends a statement-close that the server never answers. sqlx
/// 0.9.0 leaves Nagle's algorithm on, so the next command then waits for the delayed ACK, on
/// every query once the cache is full (the figures are in
/// docs/bench-journal/figures-behind-the-code.md).
pub(crate) fn expand_list(text: &str, marker: &str, n: usize) -> String {
    let n = n.max(1).next_power_of_two();
    text.replacen(marker, &vec!["?"; n].join(", "), 1)
}

/// `text` with `marker` replaced by `n` groups of `width` `?` placeholders.
pub(crate) fn expand_rows(text: &str, marker: &str, n: usize, width: usize) -> String {
    let one = format!("({})", vec!["?"; width].join(", "));
    text.replacen(marker, &vec![one; n].join(", "), 1)
}

/// A list's values with the last one repeated up to the next power of two.
fn padded<T>(values: &[T]) -> impl Iterator<Item = &T> {
    let pad = values.len().max(1).next_power_of_two() - values.len();
    values
        .iter()
        .chain(values.last().into_iter().cycle().take(pad))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_pad_to_a_power_of_two() {
        assert_eq!(expand_list("IN (/*IDS*/)", "/*IDS*/", 3), "IN (?, ?, ?, ?)");
        assert_eq!(expand_list("IN (/*IDS*/)", "/*IDS*/", 1), "IN (?)");
        let v: Vec<i32> = padded(&[1, 2, 3]).copied().collect();
        assert_eq!(v, [1, 2, 3, 3]);
        assert_eq!(
            expand_rows("VALUES /*ROWS*/", "/*ROWS*/", 2, 2),
            "VALUES (?, ?), (?, ?)"
        );
    }

    #[test]
    fn every_dialect_has_its_catalog() {
        for d in ["postgres", "mysql", "sqlite"] {
            assert!(entries(d).len() > 40, "{d}");
        }
    }
}
