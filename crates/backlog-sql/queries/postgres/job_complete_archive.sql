-- One statement: the CTE deletes the rows and the INSERT moves exactly those, atomically.
-- (id, lease_token) pairs come as two parallel arrays (see job_complete_delete for the lock order).
WITH target AS (
    SELECT j.id FROM UNNEST($1::bigint[], $2::bigint[]) AS t(id, token)
    JOIN backlog_job j ON j.id = t.id AND j.lease_token = t.token
    WHERE j.state = 'running'
    ORDER BY j.id
    FOR UPDATE OF j
), moved AS (
    DELETE FROM backlog_job j USING target WHERE j.id = target.id
    RETURNING j.*
)
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, $3,
       cancel_requested_at
FROM moved
RETURNING id
