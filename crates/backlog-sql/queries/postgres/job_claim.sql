-- SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of queueing on them.
WITH picked AS (
    SELECT id FROM backlog_job
    WHERE queue = $5 AND state = 'available' AND run_at <= $4
      AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = $5 AND paused)
    ORDER BY /*ORDER*/
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
          j.run_at, j.created_at, j.trace_context
