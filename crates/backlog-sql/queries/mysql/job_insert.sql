-- Multi-row insert, nine ? per row. A taken unique key inserts nothing (a no-op update, not
-- INSERT IGNORE, which would also swallow other errors). lease_token carries a marker that
-- job_insert_created reads the new ids by (no RETURNING in MySQL).
INSERT INTO backlog_job
    (queue, kind, payload, priority, run_at, max_attempts, trace_context, unique_key, created_at,
     lease_token)
VALUES /*ROWS*/
ON DUPLICATE KEY UPDATE id = id
