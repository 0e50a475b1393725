-- Rows without unique keys, when one statement's ids are consecutive (auto-increment lock mode 0
-- or 1): every row goes in, so nothing can conflict and no marker is needed to find the new ids.
-- Each job's shard: at random below its queue's `shards` (the Rust side picks it).
-- @rows ROWS rows: (&str, Option<&str>, &str, i16, i64, Option<i32>, Option<String>, i64, i16)
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at,
                         shard)
VALUES /*ROWS*/
