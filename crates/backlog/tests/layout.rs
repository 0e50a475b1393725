//! The worker's parts (`src/worker/*.rs`) import one another without a circle: each can be read
//! (and changed) knowing only the parts below it. `metrics.rs` (the counts) is a leaf, and
//! `state.rs` (the worker's setup) imports only it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each part and the sibling modules it names as `super::NAME`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/worker");
    let parts: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|m| m != "mod")
        .collect();
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
            !reaches(&graph, part, part, &mut BTreeSet::new()),
            "{part} imports itself through other parts: {graph:#?}"
        );
    }
}
