-- @generated from templates/postgres/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (FIFO), in the
-- transaction that holds the queue row's lock (queue_lock) and has counted its running jobs
-- (queue_running): `limit` is what the limit leaves. Not the paused check of job_claim_fifo:
-- queue_lock read it under the lock.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- Cursor: each shard's claim starts past `cursor` (three values a shard: priority, run_at,
-- id; src/cursor.rs), past the index entries that claimed and completed jobs leave
-- behind while a held snapshot keeps vacuum from removing them. Empty, or a shard beyond
-- it: from the head (a full pass).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param cursor: &[i64]
WITH heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first
    FROM (SELECT COALESCE(max(shards), 1) AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND (priority, run_at, id) > (COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 1], -32768)::smallint,
                                        COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 2], -9223372036854775807),
                                        COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 3], -9223372036854775807))
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at, id
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
    lease_expires_at = $3, attempted_at = $4
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING
    j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
    j.run_at, j.created_at, j.trace_context, j.group_key, j.shard
