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

/// `sql` with `/*ORDER*/` replaced for each ordering, rendered once at start-up.
#[derive(Debug, Clone)]
pub(crate) struct Ordered {
    fifo: String,
    lifo: String,
}

impl Ordered {
    pub fn new(sql: &str) -> Self {
        debug_assert!(sql.contains("/*ORDER*/"));
        Ordered {
            fifo: sql.replace("/*ORDER*/", order_clause(Ordering::Fifo)),
            lifo: sql.replace("/*ORDER*/", order_clause(Ordering::Lifo)),
        }
    }

    pub fn get(&self, order: Ordering) -> &str {
        match order {
            Ordering::Fifo => &self.fifo,
            Ordering::Lifo => &self.lifo,
        }
    }
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
}
