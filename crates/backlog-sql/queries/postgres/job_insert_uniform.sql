-- Rows that differ only in their payload (the usual batch: one queue, kind, priority and time),
-- without unique keys: the shared values go once and only the payloads as an array, so neither
-- side encodes or decodes five arrays of one repeated value. Ids follow input order as in
-- job_insert_plain, and come back as one array in one row: a row per id cost the client more
-- CPU than the rest of the enqueue (a message, a row and a decode each).
-- Each job's shard: at random below its queue's `shards` (0 when the queue has no row or one shard).
-- @param queue: &str
-- @param kind: Option<&str>
-- @param priority: i16
-- @param run_at: i64
-- @param max_attempts: Option<i32>
-- @param now: i64
-- @param payloads: Vec<&str>
-- @param trace_context: Option<String>
WITH ins AS (
    INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at,
                             shard)
    SELECT $1, $2, p::jsonb, $3, $4, $5, $8, $6, floor(random() * n.shards)
    FROM UNNEST($7::text[]) WITH ORDINALITY AS t(p, ord),
         (SELECT COALESCE(max(shards), 1) AS shards FROM backlog_queue WHERE name = $1) AS n
    ORDER BY ord
    RETURNING id
)
SELECT array_agg(id) FROM ins
