-- (id, lease_token) pairs come as two parallel arrays: one statement for any batch size (see
-- job_complete_delete for the lock order).
WITH target AS (
    SELECT j.id FROM UNNEST($1::bigint[], $2::bigint[]) AS t(id, token)
    JOIN backlog_job j ON j.id = t.id AND j.lease_token = t.token
    WHERE j.state = 'running'
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE backlog_job j
SET state = 'completed', finished_at = $3, lease_token = NULL, lease_expires_at = NULL
FROM target
WHERE j.id = target.id
RETURNING j.id
