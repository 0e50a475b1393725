-- Rows without unique keys: every row goes in, so nothing can conflict and only ids come back,
-- in input order (rows are inserted in ordinality order and ids come from one sequence), as one
-- array in one row (see job_insert_uniform).
-- Each job's shard: at random below its queue's `shards` (0 when the queue has no row or one shard).
-- @param queues: Vec<Option<String>>
-- @param kinds: Vec<Option<String>>
-- @param payloads: Vec<Option<String>>
-- @param priorities: Vec<i16>
-- @param run_ats: Vec<i64>
-- @param max_attempts: Vec<Option<i32>>
-- @param trace_contexts: Vec<Option<String>>
-- @param now: i64
WITH ins AS (
    INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at,
                             shard)
    SELECT q, k, p::jsonb, pr, ra, ma, tc, $8, COALESCE(floor(random() * bq.shards), 0)
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::bigint[], $6::int[],
                $7::text[])
         WITH ORDINALITY AS t(q, k, p, pr, ra, ma, tc, ord)
         LEFT JOIN backlog_queue AS bq ON bq.name = t.q
    ORDER BY ord
    RETURNING id
)
SELECT array_agg(id) FROM ins
