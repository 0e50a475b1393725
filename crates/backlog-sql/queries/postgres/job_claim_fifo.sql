-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
WITH picked AS (
    SELECT id FROM backlog_job
    WHERE queue = $5 AND state = 'available' AND run_at <= $4
      AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = $5 AND (paused OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at, id
    LIMIT $7
    FOR UPDATE SKIP LOCKED
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
    lease_expires_at = $3, attempted_at = $4
FROM picked
WHERE j.id = picked.id
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
          j.run_at, j.created_at, j.trace_context, j.group_key
