-- One row without a unique key (a single enqueue): plain VALUES, which PostgreSQL plans and runs
-- cheaper than the arrays of job_insert.
-- Each job's shard: at random below its queue's `shards` (0 when the queue has no row or one shard).
-- @param queue: &str
-- @param kind: Option<&str>
-- @param payload: &str
-- @param priority: i16
-- @param run_at: i64
-- @param max_attempts: Option<i32>
-- @param now: i64
-- @param trace_context: Option<String>
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at,
                         shard)
VALUES ($1, $2, $3::jsonb, $4, $5, $6, $8, $7,
        (SELECT floor(random() * COALESCE(max(shards), 1)) FROM backlog_queue WHERE name = $1))
RETURNING id
