-- Completes running jobs whose lease tokens still match: moves them to the archive, returning their
-- ids. One statement: the CTE deletes the rows and the INSERT moves exactly those, atomically. (id,
-- lease_token) pairs come as two parallel arrays (see job_complete_delete for the lock order).
-- @param ids: &[i64]
-- @param tokens: &[i64]
-- @param now: i64
WITH moved AS (
    DELETE FROM backlog_job
    WHERE id = ANY($1::bigint[]) AND state = 'running'
      AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
    RETURNING *
)
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, $3,
       cancel_requested_at, trace_context, group_key
FROM moved
RETURNING id
