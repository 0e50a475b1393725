-- @generated from templates/postgres/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
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
        ORDER BY priority, run_at DESC, id DESC
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
    j.run_at, j.created_at, j.trace_context, j.group_key
