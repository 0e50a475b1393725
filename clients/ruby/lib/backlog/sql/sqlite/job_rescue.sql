-- Expired leases: back to available, or dead when the attempt that died was the last one.
-- Returns the queue of each job rescued and whether it ended dead (for the per-queue counts).
-- After: the rescue's floor, as on PostgreSQL (the smallest integer: a full pass).
-- @param now: i64
-- @param limit: i64
-- @param after: i64
UPDATE backlog_job
SET state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN ?1 ELSE NULL END,
    run_at = ?1,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?1,
             'error', 'lease expired (worker ' || COALESCE(lease_owner, '?') || ' stopped heartbeating)')),
    lease_token = NULL, lease_expires_at = NULL
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE state = 'running' AND lease_expires_at < ?1 AND lease_expires_at >= ?3
    ORDER BY lease_expires_at
    LIMIT +?2
)
RETURNING queue, state = 'dead' AS dead
