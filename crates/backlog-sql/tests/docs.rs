#![allow(missing_docs)]
//! docs/sql.md cannot drift from the statements that run: every block it marks
//! `<!-- query: DIALECT/NAME.sql -->` must be that file's text, exactly.

use std::path::Path;

/// The ```sql block after each query marker: (marker line, file, block).
fn marked_blocks(doc: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = vec![];
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim().strip_prefix("<!-- query: ") else {
            continue;
        };
        let file = rest.trim_end_matches("-->").trim().to_owned();
        let open = lines[i + 1..]
            .iter()
            .position(|l| l.trim() == "```sql")
            .map(|p| i + 1 + p)
            .unwrap_or_else(|| panic!("line {}: no ```sql block after the marker", i + 1));
        assert!(
            lines[i + 1..open].iter().all(|l| l.trim().is_empty()),
            "line {}: the marker must be followed by its block",
            i + 1
        );
        let close = lines[open + 1..]
            .iter()
            .position(|l| l.trim() == "```")
            .map(|p| open + 1 + p)
            .expect("a closed block");
        out.push((i + 1, file, lines[open + 1..close].join("\n")));
    }
    out
}

#[test]
fn sql_md_shows_each_statement_as_its_file_has_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../../docs/sql.md")).unwrap();
    let blocks = marked_blocks(&doc);
    assert!(
        blocks.len() >= 30,
        "only {} marked statements",
        blocks.len()
    );
    let mut stale = vec![];
    for (line, file, block) in &blocks {
        let path = root.join("queries").join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("docs/sql.md line {line}: {file}: {e}"));
        if text.trim_end() != block.trim_end() {
            stale.push(format!("line {line}: {file}"));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/sql.md differs from the query files (copy each file's text into its block): {stale:#?}"
    );
}
