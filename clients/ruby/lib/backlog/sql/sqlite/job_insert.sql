-- Multi-row insert, one row of values per job. A taken unique key inserts nothing.
-- @rows ROWS rows: (&str, Option<&str>, &str, i16, i64, Option<i32>, Option<String>, Option<&str>, i64)
INSERT INTO backlog_job
    (queue, kind, payload, priority, run_at, max_attempts, trace_context, unique_key, created_at)
VALUES /*ROWS*/
ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND state IN ('available', 'running', 'held', 'waiting')
DO NOTHING
RETURNING id, queue, unique_key
