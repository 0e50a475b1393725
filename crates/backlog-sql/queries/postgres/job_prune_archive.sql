-- One statement: the CTE deletes one bounded batch (oldest first by id) and the INSERT moves
-- exactly those rows, so a job finishing between two statements can be neither lost nor kept.
-- The batch is picked as in job_prune_delete (see there for the NOT IN, ARRAY and SKIP LOCKED).
-- @param queue: &str
-- @param state: &str
-- @param finished_before: i64
-- @param limit: i64
WITH moved AS (
    DELETE FROM backlog_job
    WHERE id = ANY(ARRAY(
        SELECT id FROM backlog_job
        WHERE queue = $1 AND state = $2 AND state NOT IN ('available', 'running')
          AND finished_at < $3
        ORDER BY id LIMIT $4
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
