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
/// statement at a time). A compound body, from a line `BEGIN` on, ends only at a line `END;`:
/// the statements inside a trigger's body end in `;` too.
pub(crate) fn split_statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut compound = false;
    for line in sql.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if trimmed == "BEGIN" {
            compound = true;
        }
        let ends = if compound {
            trimmed == "END;"
        } else {
            trimmed.ends_with(';')
        };
        if ends {
            compound = false;
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

    #[test]
    fn a_trigger_body_stays_one_statement() {
        let sql = "CREATE TRIGGER t AFTER INSERT ON a FOR EACH ROW\nBEGIN\n    DECLARE x INT;\n    \
                   SET x = 1;\nEND;\nCREATE TABLE b (y INT);\n";
        let s = split_statements(sql);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].contains("SET x = 1;") && s[0].trim_end().ends_with("END;"));
    }
}
