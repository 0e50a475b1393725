//! Migrations: the embedded files of each dialect, and splitting one into statements for the
//! drivers that run one at a time. Every other statement is in the catalog (`catalog.rs`).

/// One embedded migration.
pub(crate) struct Migration {
    /// Its number (the same numbering in every dialect).
    pub version: i64,
    /// Its name.
    pub name: &'static str,
    /// The SQL text.
    pub sql: &'static str,
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
    fn splits_migrations_into_statements() {
        let s = split_statements("-- c\nCREATE TABLE a (x INT);\n\nCREATE TABLE b (\n y INT\n);\n");
        assert_eq!(s.len(), 2);
        assert!(s[1].contains("y INT"));
    }
}
