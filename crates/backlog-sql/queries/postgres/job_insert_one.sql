-- One row without a unique key (a single enqueue): plain VALUES, which PostgreSQL plans and runs
-- cheaper than the arrays of job_insert.
-- @param queue: &str
-- @param kind: Option<&str>
-- @param payload: &str
-- @param priority: i16
-- @param run_at: i64
-- @param max_attempts: Option<i32>
-- @param now: i64
-- @param trace_context: Option<String>
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at)
VALUES ($1, $2, $3::jsonb, $4, $5, $6, $8, $7)
RETURNING id
