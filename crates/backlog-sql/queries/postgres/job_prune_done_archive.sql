-- Retention `archive` for completed jobs kept apart in backlog_job_done (those a queue kept
-- before its retention became `archive`): moves one bounded batch that finished before the
-- window into backlog_job_archive, in one statement, and returns their finish times. Picked and
-- bounded as in job_prune_done (see there for the cursor).
-- @param queue: &str
-- @param finished_before: i64
-- @param limit: i64
-- @param after_finished: i64
WITH moved AS (
    DELETE FROM backlog_job_done
    WHERE id = ANY(ARRAY(
        SELECT id FROM backlog_job_done
        WHERE queue = $1 AND finished_at < $2 AND finished_at >= $4
        ORDER BY finished_at LIMIT $3
        FOR UPDATE SKIP LOCKED))
    RETURNING *
)
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key
FROM moved
RETURNING finished_at
