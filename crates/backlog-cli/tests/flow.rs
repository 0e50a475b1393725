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
        let id = db.sql("SELECT MAX(id) FROM backlog_job_all WHERE group_key = 'acct-1'");
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

/// `--shards`: set, shown, lowered on a live queue without stranding a job, and refused when bad
/// without changing anything.
#[test]
fn shards_from_the_command_line() {
    for db in TestDb::all() {
        let set = db.ok(&["queue", "set", "events", "--shards", "8"]);
        assert!(
            set.contains("shards        8 (order kept within each shard)"),
            "{set}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&db.ok(&["queue", "show", "events", "--json"])).unwrap();
        assert_eq!(json["shards"], 8, "{json}");
        for bad in ["0", "257", "-1", "eight"] {
            db.fails(
                &["queue", "set", "events", &format!("--shards={bad}")],
                "shards",
            );
        }
        let kept = db.sql("SELECT shards FROM backlog_queue WHERE name = 'events'");
        assert_eq!(kept.trim(), "8");
        for i in 0..20 {
            db.ok(&["enqueue", "events", &format!("{{\"n\": {i}}}")]);
        }
        let set = db.ok(&["queue", "set", "events", "--shards", "1"]);
        assert!(set.contains("shards        1 (one strict order)"), "{set}");
        db.ok(&["work", "events", "--drain", "--", "true"]);
        let stats: serde_json::Value =
            serde_json::from_str(&db.ok(&["stats", "events", "--json"])).unwrap();
        assert_eq!(stats["events"]["available"], 0, "{stats}");
        assert_eq!(stats["events"]["completed"], 20, "{stats}");
    }
}

/// `--group-rate-limit`: set, shown, held-up groups told apart by why, lifted, and refused when
/// bad without changing anything.
#[test]
fn group_rate_limit_from_the_command_line() {
    for db in TestDb::all() {
        let set = db.ok(&["queue", "set", "sync", "--group-rate-limit", "10/1m"]);
        assert!(
            set.contains("group rate    10 starts per 1m, in each group, every process"),
            "{set}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&db.ok(&["queue", "show", "sync", "--json"])).unwrap();
        assert_eq!(json["group_rate_limit"]["starts"], 10, "{json}");
        assert_eq!(json["group_rate_limit"]["period"], "1m", "{json}");
        for (bad, needle) in [
            ("0/1s", "rate limit"),
            ("ten/1m", "rate limit"),
            ("5/0s", "rate limit"),
        ] {
            db.fails(&["queue", "set", "sync", "--group-rate-limit", bad], needle);
        }
        let kept = db.sql("SELECT group_rate_limit FROM backlog_queue WHERE name = 'sync'");
        assert_eq!(kept.trim(), "10");
        // A group whose next job its rate limit holds back (one not run yet, due later) shows as
        // held by the limit, beside one held by a failed job's retry.
        db.ok(&["enqueue", "sync", "{}", "--group", "acct-9"]);
        db.ok(&["enqueue", "sync", "{}", "--group", "acct-9"]);
        db.ok(&["enqueue", "sync", "{}", "--group", "acct-7"]);
        let far = i64::MAX / 4;
        db.sql(&format!(
            "UPDATE backlog_job SET run_at = {far} WHERE queue = 'sync' AND state = 'available'"
        ));
        db.sql("UPDATE backlog_job SET attempt = 1 WHERE queue = 'sync' AND group_key = 'acct-7'");
        let show = db.ok(&["queue", "show", "sync"]);
        let line = |group: &str| {
            show.lines()
                .find(|l| l.trim_start().starts_with(group))
                .unwrap_or_else(|| panic!("no {group} in {show}"))
                .to_owned()
        };
        assert!(line("acct-9").contains("rate limit, starts at"), "{show}");
        assert!(line("acct-9").contains("1 waiting behind it"), "{show}");
        assert!(line("acct-7").contains("retries at"), "{show}");
        let lifted = db.ok(&["queue", "set", "sync", "--group-rate-limit", "none"]);
        assert!(lifted.contains("group rate    none"), "{lifted}");
        let stored = db.sql("SELECT COUNT(*) FROM backlog_queue WHERE group_rate_limit IS NULL");
        assert_eq!(stored.trim(), "1");
    }
}
