-- @generated from templates/postgres/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- The queue's jobs lie on `shards` claim heads (backlog_queue.shards; 1: one strict head). The
-- claim starts at a random shard and takes each shard's head in turn, in the order above,
-- until it has `limit` jobs: one index probe per shard it visits (the LATERAL subquery), so
-- it costs O(limit + shards) whatever the statistics. The count and the first shard are read
-- once into a MATERIALIZED CTE: inlined, random() would be folded into the probe and run again
-- at each shard. The shards come from a constant series cut to the count (one per possible
-- shard, 256): a series bounded by the count itself made PostgreSQL 15 spend about 10 ms on
-- every claim (against 0.15 ms) once the subquery holds FOR UPDATE.
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
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING
    j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
    j.run_at, j.created_at, j.trace_context, j.group_key, j.shard
