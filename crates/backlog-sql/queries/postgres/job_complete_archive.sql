-- One statement: the CTE deletes the rows and the INSERT moves exactly those, atomically.
-- (id, lease_token) pairs come as two parallel arrays; rows are locked in id order first so
-- concurrent multi-row writers cannot deadlock.
WITH target AS (
    SELECT id FROM backlog_job
    WHERE state = 'running'
      AND (id, lease_token) IN (SELECT * FROM UNNEST($1::bigint[], $2::bigint[]))
    ORDER BY id
    FOR UPDATE
), moved AS (
    DELETE FROM backlog_job j USING target WHERE j.id = target.id
    RETURNING j.*
)
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, $3
FROM moved
RETURNING id
