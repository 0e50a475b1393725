//! `backlog enqueue --after`: jobs that wait for other jobs (issue 47), run by `backlog work`
//! on every engine: a child runs only after its parents, a failed parent cancels the children
//! that say so and not the others, and bad dependencies are refused with nothing written.

mod common;

use common::TestDb;
use serde_json::Value;

fn show(db: &TestDb, id: &str) -> Value {
    serde_json::from_str(&db.ok(&["job", "show", id, "--json"])).unwrap()
}

#[test]
fn children_run_after_their_parents_on_every_engine() {
    for db in TestDb::all() {
        let engine = db.engine;
        let a = db.ok(&["enqueue", "flow", r#""a""#]).trim().to_owned();
        let b = db.ok(&["enqueue", "flow", r#""b""#]).trim().to_owned();
        let parents = format!("{a},{b}");
        let c = db
            .ok(&["enqueue", "flow", r#""c""#, "--after", &parents])
            .trim()
            .to_owned();
        let d = db
            .ok(&["enqueue", "flow", r#""d""#, "--after", &c])
            .trim()
            .to_owned();
        let shown = show(&db, &c);
        assert_eq!(
            (shown["state"].as_str(), shown["deps_left"].as_i64()),
            (Some("waiting"), Some(2)),
            "{engine:?}: {shown}"
        );
        assert_eq!(db.stats()["flow"]["waiting"], 2, "{engine:?}");
        // One worker, one job at a time: the log is the order they ran in.
        let log = db.path("order.log");
        let script = format!("cat >> {}; echo >> {}", log.display(), log.display());
        db.ok(&[
            "work",
            "flow",
            "--drain",
            "--concurrency",
            "1",
            "--",
            "sh",
            "-c",
            &script,
        ]);
        let order: Vec<String> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(order.len(), 4, "{engine:?}: {order:?}");
        assert_eq!(
            &order[2..],
            [r#""c""#, r#""d""#],
            "{engine:?}: c after a and b, d after c"
        );
        assert_eq!(db.stats()["flow"]["completed"], 4, "{engine:?}");
        let _ = d;
    }
}

#[test]
fn a_failed_parent_cancels_the_children_that_say_so() {
    for db in TestDb::all() {
        let engine = db.engine;
        let parent = db
            .ok(&["enqueue", "fails", "1", "--max-attempts", "1"])
            .trim()
            .to_owned();
        let cancel = db
            .ok(&["enqueue", "fails", "2", "--after", &parent])
            .trim()
            .to_owned();
        let grandchild = db
            .ok(&["enqueue", "fails", "3", "--after", &cancel])
            .trim()
            .to_owned();
        let runs = db
            .ok(&[
                "enqueue",
                "fails",
                "4",
                "--after",
                &parent,
                "--on-parent-failure",
                "run",
            ])
            .trim()
            .to_owned();
        // Payload 1 fails; the others succeed.
        db.ok(&[
            "work",
            "fails",
            "--drain",
            "--",
            "sh",
            "-c",
            r#"read p; [ "$p" != 1 ]"#,
        ]);
        assert_eq!(show(&db, &parent)["state"], "dead", "{engine:?}");
        for id in [&cancel, &grandchild] {
            let j = show(&db, id);
            assert_eq!(j["state"], "cancelled", "{engine:?}: {j}");
        }
        let j = show(&db, &cancel);
        let error = j["errors"][0]["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("job {parent}")) && error.contains("dead"),
            "{engine:?}: {error}"
        );
        assert_eq!(show(&db, &runs)["state"], "completed", "{engine:?}");
    }
}

#[test]
fn bad_dependencies_are_refused_and_write_nothing() {
    for db in TestDb::all() {
        let parent = db.ok(&["enqueue", "bad", "1"]).trim().to_owned();
        let twice = format!("{parent},{parent}");
        for (args, needle) in [
            (
                vec!["enqueue", "bad", "2", "--after", "987654321"],
                "job 987654321 cannot be waited for",
            ),
            (vec!["enqueue", "bad", "2", "--after", "0"], "not a job id"),
            (
                vec!["enqueue", "bad", "2", "--after", &twice],
                "named twice",
            ),
            (
                vec!["enqueue", "bad", "2", "--after", &parent, "--group", "g"],
                "ordered group",
            ),
            (
                vec![
                    "enqueue",
                    "bad",
                    "2",
                    "--after",
                    &parent,
                    "--on-parent-failure",
                    "sometimes",
                ],
                "expected one of: cancel, run, ignore",
            ),
            (
                vec!["enqueue", "bad", "2", "--on-parent-failure", "run"],
                "--after",
            ),
            (
                vec!["enqueue", "bad", "2", "--after", "x"],
                "invalid value 'x'",
            ),
        ] {
            db.fails(&args, needle);
        }
        let stats = db.stats();
        assert_eq!(stats["bad"]["available"], 1, "{:?}: {stats}", db.engine);
        assert_eq!(stats["bad"]["waiting"], 0);
    }
}
