-- Expired leases: back to available, or dead when the attempt that died was the last one.
-- Returns the queue of each job rescued and whether it ended dead (for the per-queue counts).
-- SKIP LOCKED: a row held open by a transaction-mode claimer or another rescuer is passed over;
-- the outer WHERE rechecks state and expiry on the row as it is once locked. = ANY(ARRAY(…)): the
-- batch is locked once (an InitPlan); `id IN (SELECT … LIMIT … FOR UPDATE)` may be rescanned per
-- outer row, each rescan locking more rows than the limit.
-- After: the rescue's floor (src/cursor.rs): only leases that expired since the last complete
-- pass, past the index entries of finished jobs that a held snapshot keeps vacuum from
-- removing; the smallest bigint for a full pass.
-- @param now: i64
-- @param limit: i64
-- @param after: i64
UPDATE backlog_job
SET state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN $1::bigint ELSE NULL END,
    run_at = $1,
    errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', $1::bigint,
             'error', 'lease expired (worker ' || COALESCE(lease_owner, '?') || ' stopped heartbeating)')),
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ANY(ARRAY(
    SELECT id FROM backlog_job
    WHERE state = 'running' AND lease_expires_at < $1 AND lease_expires_at >= $3
    ORDER BY lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
))
AND state = 'running' AND lease_expires_at < $1
RETURNING queue, state = 'dead' AS dead
