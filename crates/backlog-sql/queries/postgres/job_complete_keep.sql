-- (id, lease_token) pairs come as two parallel arrays: one statement for any batch size.
-- Rows are locked in id order first so concurrent multi-row writers cannot deadlock.
WITH target AS (
    SELECT id FROM backlog_job
    WHERE state = 'running'
      AND (id, lease_token) IN (SELECT * FROM UNNEST($1::bigint[], $2::bigint[]))
    ORDER BY id
    FOR UPDATE
)
UPDATE backlog_job j
SET state = 'completed', finished_at = $3, lease_token = NULL, lease_expires_at = NULL
FROM target
WHERE j.id = target.id
RETURNING j.id
