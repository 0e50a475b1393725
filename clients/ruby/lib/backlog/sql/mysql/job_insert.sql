-- Multi-row insert. A taken unique key inserts nothing (a no-op update, not
-- INSERT IGNORE, which would also swallow other errors). lease_token carries a marker that
-- job_insert_created reads the new ids by (no RETURNING in MySQL).
-- Each job's shard: at random below its queue's `shards` (the Rust side picks it).
-- @rows ROWS rows: (&str, Option<&str>, &str, i16, i64, Option<i32>, Option<String>, Option<&str>, i64, i64, i16)
INSERT INTO backlog_job
    (queue, kind, payload, priority, run_at, max_attempts, trace_context, unique_key, created_at,
     lease_token, shard)
VALUES /*ROWS*/
ON DUPLICATE KEY UPDATE id = id
