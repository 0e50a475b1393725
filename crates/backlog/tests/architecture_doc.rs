//! docs/architecture.md names what it describes: files (`plan.rs`, `job_claim.sql`), types
//! (`ClaimPlan`), their members (`WorkerConfig::fetchers`) and constants (`DEFAULT_CLAIM_MAX`).
//! Each must exist in the workspace's code, so the document cannot go on describing what the
//! code no longer has.

use std::path::{Path, PathBuf};

/// Every `.rs` and `.sql` file under `crates/`.
fn sources(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut dirs = vec![root.join("crates")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|x| x == "rs" || x == "sql") {
                out.push(path);
            }
        }
    }
    out
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[test]
fn every_file_type_and_member_the_architecture_doc_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let files = sources(&root);
    let code: String = files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let defines = |name: &str| {
        [
            "struct",
            "enum",
            "trait",
            "type",
            "fn",
            "const",
            "mod",
            "static",
            "macro_rules!",
        ]
        .iter()
        .any(|kw| code.contains(&format!("{kw} {name}")))
            || code.contains(&format!("pub {name}:"))
            || code.contains(&format!("    {name},"))
            || code.contains(&format!("    {name}("))
            || code.contains(&format!("    {name} {{"))
    };
    let mut missing = vec![];
    let mut checked = 0;
    for (i, span) in doc.split('`').enumerate() {
        if i % 2 == 0 {
            continue; // outside backticks
        }
        let name = span.trim();
        // A pattern (`<dialect>/<name>.sql`, `job_claim_{fifo,lifo}.sql`, `…_*.sql`) stands for
        // files, not one file: the part before the first wildcard must begin some file's name.
        if let Some(cut) = name.find(['<', '{', '*']) {
            if name.ends_with(".rs") || name.ends_with(".sql") {
                checked += 1;
                let head = &name[..cut];
                let head = head.rsplit('/').next().unwrap_or(head);
                let found = files.iter().any(|p| {
                    p.file_name()
                        .is_some_and(|f| f.to_string_lossy().starts_with(head))
                });
                if !found {
                    missing.push(format!("files {name}"));
                }
            }
            continue;
        }
        if name.ends_with(".rs") || name.ends_with(".sql") {
            checked += 1;
            let tail = name.trim_start_matches("crates/");
            if !files.iter().any(|p| p.to_string_lossy().ends_with(tail)) {
                missing.push(format!("file {name}"));
            }
            continue;
        }
        // `Type::member` and `Type::member()`: both must be defined.
        let path = name.trim_end_matches("()");
        let parts: Vec<&str> = path.split("::").collect();
        if parts.len() == 2 && parts.iter().all(|p| is_ident(p)) {
            let (ty, member) = (parts[0], parts[1]);
            if ty.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
                checked += 1;
                if !defines(ty) || !defines(member) {
                    missing.push(name.to_owned());
                }
            }
            continue;
        }
        // CamelCase types and SCREAMING constants.
        let camel = is_ident(path)
            && path.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && path.chars().any(|c| c.is_ascii_lowercase());
        let constant = is_ident(path)
            && path.len() > 3
            && path.contains('_')
            && path
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if camel || constant {
            checked += 1;
            if !defines(path) {
                missing.push(path.to_owned());
            }
        }
    }
    assert!(checked >= 50, "only {checked} names checked");
    assert!(
        missing.is_empty(),
        "docs/architecture.md names what the code does not have: {missing:#?}"
    );
}

/// Every method of the `Dialect` trait and every capability flag is described.
#[test]
fn the_architecture_doc_names_every_dialect_method_and_capability() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let engine = std::fs::read_to_string(root.join("crates/backlog-sql/src/engine.rs")).unwrap();
    let start = engine
        .find("pub(crate) trait Dialect")
        .expect("the Dialect trait");
    let body = &engine[start..];
    let body = &body[..body.find("\n}").unwrap()];
    let methods: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().strip_prefix("fn "))
        .map(|l| l.split(['(', '<']).next().unwrap())
        .collect();
    assert!(methods.len() >= 20, "only {} methods found", methods.len());
    let backend = std::fs::read_to_string(root.join("crates/backlog-core/src/backend.rs")).unwrap();
    let start = backend
        .find("pub struct Capabilities")
        .expect("Capabilities");
    let body = &backend[start..];
    let body = &body[..body.find("\n}").unwrap()];
    let flags: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split_once(": bool").map(|(name, _)| name))
        .collect();
    assert!(flags.len() >= 5, "only {} flags found", flags.len());
    let missing: Vec<_> = methods
        .iter()
        .chain(&flags)
        .filter(|name| !doc.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not describe {missing:?}"
    );
}
