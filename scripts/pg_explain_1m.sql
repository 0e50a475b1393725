-- The 1M-row EXPLAIN of the runtime's claim and completion for a busy queue (docs/explain.md):
--     psql postgres://postgres@127.0.0.1:5432/test -f scripts/pg_explain_1m.sql
-- Needs a migrated database; adds 1,000,000 jobs to queue 'big' and deletes them at the end.
-- The statement is the one docs/sql.md shows (sqltext::complete_with_claim, retention delete, one token).
-- 1,000,000 available jobs in queue 'big' (16 shards), 50 of them claimed under token 42 (to be
-- completed).
DELETE FROM backlog_job WHERE queue = 'big';
INSERT INTO backlog_queue (name, shards, created_at, updated_at) VALUES ('big', 16, 0, 0)
ON CONFLICT (name) DO UPDATE SET shards = 16;
INSERT INTO backlog_job (queue, payload, run_at, created_at, shard)
SELECT 'big', jsonb_build_object('i', g), 0, 0, g % 16 FROM generate_series(1, 1000000) g;
VACUUM ANALYZE backlog_job;
UPDATE backlog_job SET state = 'running', attempt = 1, lease_token = 42, lease_expires_at = 9e15
WHERE id IN (SELECT id FROM backlog_job WHERE queue = 'big' AND state = 'available'
             ORDER BY priority, run_at, id LIMIT 50);
SET plan_cache_mode = force_generic_plan;
SET enable_seqscan = off;
SELECT array_agg(id) AS ids FROM backlog_job WHERE queue = 'big' AND lease_token = 42 \gset
PREPARE fast(bigint, text, bigint, bigint, text, text[], bigint, bigint[], bigint) AS
WITH heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at, id
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
),
done AS (
    DELETE FROM backlog_job
    WHERE id = ANY($8::bigint[]) AND state = 'running'
      AND lease_token = $9::bigint
      AND EXISTS (SELECT 1 FROM picked)
    RETURNING id
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
    lease_expires_at = $3, attempted_at = $4
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING CASE WHEN j.id = (SELECT min(id) FROM picked)
    THEN (SELECT array_agg(id) FROM done) END AS done_ids,
          j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
          j.run_at, j.created_at, j.trace_context, j.group_key;
BEGIN;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
EXECUTE fast(43, 'explain', 9e15::bigint, 1, 'big', NULL, 50,
             :'ids', 42);
ROLLBACK;
BEGIN;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
EXECUTE fast(43, 'explain', 9e15::bigint, 1, 'big', NULL, 50,
             :'ids', 42);
ROLLBACK;
DELETE FROM backlog_job WHERE queue = 'big';
DELETE FROM backlog_queue WHERE name = 'big';
VACUUM backlog_job;
