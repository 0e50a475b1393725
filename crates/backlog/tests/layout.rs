//! Modules import one another without a circle, so that each can be read (and changed) knowing
//! only the modules below it: the worker's parts (`src/worker/*.rs`: `metrics.rs`, the counts, is
//! a leaf, and `state.rs`, the worker's setup, imports only it), the `backlog` command's modules
//! (only `cli.rs`, which parses and dispatches, imports the commands) and the benchmark's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules of `dir`: the names of its `.rs` files.
fn modules(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// Each part and the sibling modules it names as `super::NAME`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/worker");
    let mut parts = modules(&dir);
    parts.remove("mod");
    parts
        .iter()
        .map(|m| {
            let text = std::fs::read_to_string(dir.join(format!("{m}.rs"))).unwrap();
            let named = parts
                .iter()
                .filter(|other| *other != m)
                .filter(|other| {
                    text.contains(&format!("super::{other}::"))
                        || text.contains(&format!("super::{other};"))
                        || text.contains(&format!("super::{other}::{{"))
                })
                .cloned()
                .collect();
            (m.clone(), named)
        })
        .collect()
}

#[test]
fn the_worker_parts_import_each_other_without_a_circle() {
    let graph = imports();
    assert!(
        graph["metrics"].is_empty(),
        "metrics imports {:?}",
        graph["metrics"]
    );
    assert!(
        graph["state"].iter().all(|d| d == "metrics"),
        "state imports {:?}",
        graph["state"]
    );
    for (part, deps) in &graph {
        assert!(
            !deps.contains("run"),
            "{part} imports run.rs, which wires the parts"
        );
    }
    assert_no_circle(&graph);
}

/// Each module of a binary crate's `src/` and the sibling modules it names as `crate::NAME`
/// (or in `use crate::{…}`).
fn crate_imports(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src");
    let modules = modules(&dir);
    modules
        .iter()
        .map(|m| {
            let text = std::fs::read_to_string(dir.join(format!("{m}.rs"))).unwrap();
            let mut named = BTreeSet::new();
            for (i, _) in text.match_indices("crate::") {
                let rest = &text[i + "crate::".len()..];
                // `crate::{a, b::C}` names a and b; `crate::a::…` names a.
                let list = match rest.strip_prefix('{') {
                    Some(inner) => &inner[..inner.find('}').unwrap_or(inner.len())],
                    None => &rest[..rest.find(':').unwrap_or(0)],
                };
                for item in list.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if modules.contains(&name) && &name != m {
                        named.insert(name);
                    }
                }
            }
            (m.clone(), named)
        })
        .collect()
}

#[test]
fn the_commands_and_the_benchmark_import_each_other_without_a_circle() {
    let cli = crate_imports("backlog-cli");
    for (module, deps) in &cli {
        assert!(
            module == "main" || !deps.contains("cli"),
            "{module} imports cli.rs, which parses the arguments and dispatches: {cli:#?}"
        );
    }
    assert!(cli["args"].is_empty(), "args imports {:?}", cli["args"]);
    assert_no_circle(&cli);
    let bench = crate_imports("backlog-bench");
    for (module, deps) in &bench {
        assert!(
            !deps.contains("main"),
            "{module} imports main.rs, which dispatches: {bench:#?}"
        );
    }
    for leaf in ["args", "util"] {
        assert!(bench[leaf].is_empty(), "{leaf} imports {:?}", bench[leaf]);
    }
    assert_no_circle(&bench);
}

fn assert_no_circle(graph: &BTreeMap<String, BTreeSet<String>>) {
    // Depth-first search for a path back to where it started.
    fn reaches(
        graph: &BTreeMap<String, BTreeSet<String>>,
        from: &str,
        to: &str,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        graph[from]
            .iter()
            .any(|next| next == to || (seen.insert(next.clone()) && reaches(graph, next, to, seen)))
    }
    for part in graph.keys() {
        assert!(
            !reaches(graph, part, part, &mut BTreeSet::new()),
            "{part} imports itself through other parts: {graph:#?}"
        );
    }
}
