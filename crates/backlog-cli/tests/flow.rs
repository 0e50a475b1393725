#![allow(missing_docs)]
//! `backlog queue set`'s flow-control settings, `enqueue --group`, and what `queue show` and
//! `stats` tell of them, on every backend.

mod common;

use common::TestDb;

#[test]
fn flow_control_from_the_command_line() {
    for db in TestDb::all() {
        let set = db.ok(&[
            "queue",
            "set",
            "ledger",
            "--global-concurrency",
            "5",
            "--group-concurrency",
            "1",
            "--group-on-failure",
            "block",
            "--rate-limit",
            "100/1m",
        ]);
        assert!(set.contains("5 running at once, every process"), "{set}");
        assert!(set.contains("100 starts per 1m, every process"), "{set}");
        for n in 0..3 {
            db.ok(&[
                "enqueue",
                "ledger",
                &format!("{{\"n\":{n}}}"),
                "--group",
                "acct-1",
            ]);
        }
        db.ok(&["enqueue", "ledger", "{}", "--group", "acct-2"]);
        let stats = db.stats();
        assert_eq!(stats["ledger"]["available"], 2, "{stats}");
        assert_eq!(stats["ledger"]["waiting"], 2, "{stats}");
        let show = db.ok(&["queue", "show", "ledger"]);
        assert!(
            show.contains("running       0 of 5 (global limit)"),
            "{show}"
        );
        assert!(
            show.contains("waiting       2 job(s) in 1 group(s)"),
            "{show}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&db.ok(&["queue", "show", "ledger", "--json"])).unwrap();
        assert_eq!(json["global_concurrency"], 5);
        assert_eq!(json["flow"]["waiting_groups"], 1);
        // The group shows on the job, and `none` lifts the limit.
        let id = db.sql("SELECT MAX(id) FROM backlog_job WHERE group_key = 'acct-1'");
        let job = db.ok(&["job", "show", id.trim()]);
        assert!(job.contains("acct-1"), "{job}");
        assert_eq!(json["rate_limit"]["starts"], 100);
        let lifted = db.ok(&[
            "queue",
            "set",
            "ledger",
            "--global-concurrency",
            "none",
            "--rate-limit",
            "none",
        ]);
        assert!(lifted.contains("global limit  none"), "{lifted}");
        assert!(lifted.contains("rate limit    none"), "{lifted}");
        let stored = db.sql("SELECT COUNT(*) FROM backlog_queue WHERE global_concurrency IS NULL");
        assert_eq!(stored.trim(), "1");
    }
}

/// `bench --flow` runs on every backend: both drains complete every job, and the global limit's
/// samples never pass it.
#[test]
fn bench_flow_runs() {
    for db in TestDb::all() {
        let out = db.ok(&[
            "bench",
            "--flow",
            "--json",
            "--rounds",
            "1",
            "--jobs",
            "300",
            "--flow-groups",
            "30",
            "--flow-limit",
            "5",
            "--flow-limit-jobs",
            "40",
            "--s2-sleep",
            "50ms",
            "--s2-concurrency",
            "20",
        ]);
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(r["grouped_per_s"].as_f64().unwrap() > 0.0, "{r}");
        let most = r["limit_most_running"].as_i64().unwrap();
        assert!((1..=5).contains(&most), "{r}");
    }
}
