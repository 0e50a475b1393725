//! Helpers that build SQL text. The only things ever formatted into SQL are placeholders and
//! fragments chosen from closed enums; every value is bound.

use backlog_core::Ordering;

/// One embedded migration.
pub(crate) struct Migration {
    /// Its number (the same numbering in every dialect).
    pub version: i64,
    /// Its name.
    pub name: &'static str,
    /// The SQL text.
    pub sql: &'static str,
}

/// The ORDER BY list of the claim for an ordering: by priority, then by due time and id.
pub(crate) fn order_clause(order: Ordering) -> &'static str {
    match order {
        Ordering::Fifo => "priority, run_at, id",
        Ordering::Lifo => "priority, run_at DESC, id DESC",
    }
}

/// `sql` with `/*ORDER*/` replaced for each ordering, rendered once at start-up. Each text is
/// shared (`SqlStr` over an `Arc`): a statement sent thousands of times a second is not copied
/// for each.
#[derive(Debug, Clone)]
pub(crate) struct Ordered {
    fifo: sqlx::SqlStr,
    lifo: sqlx::SqlStr,
}

impl Ordered {
    pub fn new(sql: &str) -> Self {
        debug_assert!(sql.contains("/*ORDER*/"));
        let render = |o| shared_text(sql.replace("/*ORDER*/", order_clause(o)));
        Ordered {
            fifo: render(Ordering::Fifo),
            lifo: render(Ordering::Lifo),
        }
    }

    /// The statement for `order`, ready to pass to `sqlx::query`.
    pub fn get(&self, order: Ordering) -> sqlx::SqlStr {
        match order {
            Ordering::Fifo => self.fifo.clone(),
            Ordering::Lifo => self.lifo.clone(),
        }
    }
}

/// A statement text as a shared `SqlStr` (over an `Arc`), cloned for each use without a copy.
pub(crate) fn shared_text(sql: impl Into<std::sync::Arc<str>>) -> sqlx::SqlStr {
    sqlx::SqlSafeStr::into_sql_str(sqlx::AssertSqlSafe(sql.into()))
}

/// `rows` groups of `width` `?` placeholders: `(?, ?), (?, ?)`.
pub(crate) fn question_rows(rows: usize, width: usize) -> String {
    let one = format!("({})", vec!["?"; width].join(", "));
    vec![one; rows].join(", ")
}

/// `n` `?` placeholders: `?, ?, ?`.
pub(crate) fn question_list(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// Splits a migration file into statements at lines ending in `;` (for drivers that run one
/// statement at a time).
pub(crate) fn split_statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in sql.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if trimmed.ends_with(';') {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// `sql` with its numbered placeholders renamed: `$from` becomes `$to` for each pair, whole
/// numbers only (`$1` never matches the start of `$10`). For embedding one statement in another
/// whose parameters it must not collide with.
pub(crate) fn renumber(sql: &str, map: &[(u32, u32)]) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            continue;
        }
        let n: u32 = rest[..digits].parse().expect("digits");
        match map.iter().find(|(from, _)| *from == n) {
            Some((_, to)) => out.push_str(&to.to_string()),
            None => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// PostgreSQL: a completion statement and a claim statement as one (see
/// [`Backend::job_complete_claim`](backlog_core::Backend::job_complete_claim)). `claim` is
/// `WITH picked AS (…) UPDATE … RETURNING …`; `done` a completion statement whose parameters
/// already follow the claim's. The result is a row for each claimed job (`done_ids` NULL, then
/// the claim's columns) and one more row with `done_ids`, the ids the completion returned (NULL
/// when none), whose other columns are NULL. That extra row is a `UNION ALL` branch, which cost
/// the database less than joining the ids onto the claimed rows (`scripts/pg_claim_costs.py`).
/// Both parts see one snapshot and touch disjoint rows (running with the caller's tokens;
/// available), and the statement commits once.
pub(crate) fn complete_then_claim(done: &str, claim: &str) -> String {
    let (picked, update) = claim_parts(claim);
    format!(
        "WITH done AS (\n{done}\n), {picked},\nclaimed AS (\nUPDATE {update}\n)\n\
         SELECT NULL::bigint[] AS done_ids, c.* FROM claimed AS c\n\
         UNION ALL\n\
         SELECT d.done_ids, c.* FROM (SELECT array_agg(id) AS done_ids FROM done) AS d\n\
         LEFT JOIN claimed AS c ON false"
    )
}

/// PostgreSQL: [`complete_then_claim`] in the form for a queue that is expected to have jobs,
/// which costs the database less (no claimed rows kept aside for a `UNION ALL`): the claim's own
/// `UPDATE … RETURNING` is the statement, and `done_ids` is a column of the claimed row with the
/// smallest id (NULL on the others). The completion only takes effect when the claim finds a
/// job, so when the claim finds none the statement changes nothing and returns no row, and the
/// caller completes the jobs on their own.
pub(crate) fn complete_with_claim(done: &str, claim: &str) -> String {
    let (picked, update) = claim_parts(claim);
    let (done_where, done_returning) = done
        .rsplit_once("\nRETURNING ")
        .expect("a completion ends with RETURNING");
    let (update, returning) = update
        .rsplit_once("\nRETURNING ")
        .expect("a claim ends with RETURNING");
    format!(
        "WITH {picked},\ndone AS (\n{done_where}\n  AND EXISTS (SELECT 1 FROM picked)\n\
         RETURNING {done_returning}\n)\nUPDATE {update}\n\
         RETURNING CASE WHEN j.id = (SELECT min(id) FROM picked)\n\
         THEN (SELECT array_agg(id) FROM done) END AS done_ids, {returning}"
    )
}

/// A claim `WITH picked AS (…) UPDATE …` as its `picked AS (…)` and what follows `UPDATE `,
/// comment lines left out.
fn claim_parts(claim: &str) -> (String, String) {
    let body: String = claim
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let (picked, update) = body
        .split_once("\nUPDATE ")
        .expect("a claim is WITH picked AS (…) UPDATE …");
    let picked = picked
        .strip_prefix("WITH ")
        .expect("a claim starts with WITH");
    (picked.to_owned(), update.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_placeholders_and_splits() {
        assert_eq!(question_rows(2, 2), "(?, ?), (?, ?)");
        assert_eq!(question_list(3), "?, ?, ?");
        let s = split_statements("-- c\nCREATE TABLE a (x INT);\n\nCREATE TABLE b (\n y INT\n);\n");
        assert_eq!(s.len(), 2);
        assert!(s[1].contains("y INT"));
    }

    #[test]
    fn renumber_renames_whole_placeholders_only() {
        assert_eq!(
            renumber(
                "a = $1 AND b = $10 AND c = $2::int[] AND d = '$'",
                &[(1, 8), (2, 9)]
            ),
            "a = $8 AND b = $10 AND c = $9::int[] AND d = '$'"
        );
    }

    #[test]
    fn complete_then_claim_wraps_the_claim() {
        let sql = complete_then_claim(
            "DELETE FROM t WHERE id = ANY($8) RETURNING id",
            "-- why\nWITH picked AS (\n    SELECT id FROM t LIMIT $7\n)\nUPDATE t SET x = 1 \
             FROM picked\nRETURNING t.id",
        );
        assert!(sql.starts_with("WITH done AS (\nDELETE FROM t"), "{sql}");
        assert!(sql.contains("), picked AS (\n    SELECT id FROM t LIMIT $7\n),\nclaimed AS (\nUPDATE t SET x = 1"), "{sql}");
        assert!(sql.contains("FROM claimed AS c\nUNION ALL\n"), "{sql}");
        assert!(sql.ends_with("LEFT JOIN claimed AS c ON false"), "{sql}");
        assert!(!sql.contains("-- why"));
    }

    #[test]
    fn complete_with_claim_guards_the_completion() {
        let sql = complete_with_claim(
            "DELETE FROM t WHERE id = ANY($8)\nRETURNING id",
            "-- why\nWITH picked AS (\n    SELECT id FROM t LIMIT $7\n)\nUPDATE t j SET x = 1 \
             FROM picked\nWHERE j.id = picked.id\nRETURNING j.id, j.kind",
        );
        assert!(
            sql.starts_with("WITH picked AS (\n    SELECT id FROM t LIMIT $7\n),\ndone AS (\n"),
            "{sql}"
        );
        assert!(
            sql.contains("id = ANY($8)\n  AND EXISTS (SELECT 1 FROM picked)\nRETURNING id\n)"),
            "{sql}"
        );
        assert!(sql.contains("\nUPDATE t j SET x = 1 FROM picked\nWHERE j.id = picked.id\n"));
        assert!(
            sql.ends_with("(SELECT array_agg(id) FROM done) END AS done_ids, j.id, j.kind"),
            "{sql}"
        );
        assert!(!sql.contains("-- why"));
    }
}
