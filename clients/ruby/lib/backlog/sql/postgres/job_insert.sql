-- One statement per chunk: rows come as parallel arrays, inserted in ordinality order so ids
-- follow input order. A taken unique key inserts nothing.
-- Each job's shard: at random below its queue's `shards` (0 when the queue has no row or one shard).
-- @param queues: Vec<Option<String>>
-- @param kinds: Vec<Option<String>>
-- @param payloads: Vec<Option<String>>
-- @param priorities: Vec<i16>
-- @param run_ats: Vec<i64>
-- @param max_attempts: Vec<Option<i32>>
-- @param trace_contexts: Vec<Option<String>>
-- @param unique_keys: Vec<Option<String>>
-- @param now: i64
INSERT INTO backlog_job
    (queue, kind, payload, priority, run_at, max_attempts, trace_context, unique_key, created_at,
     shard)
SELECT q, k, p::jsonb, pr, ra, ma, tc, uk, $9, COALESCE(floor(random() * bq.shards), 0)
FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::bigint[], $6::int[],
            $7::text[], $8::text[])
     WITH ORDINALITY AS t(q, k, p, pr, ra, ma, tc, uk, ord)
     LEFT JOIN backlog_queue AS bq ON bq.name = t.q
ORDER BY ord
ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND state IN ('available', 'running', 'held', 'waiting')
DO NOTHING
RETURNING id, queue, unique_key
