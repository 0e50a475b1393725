-- Back to available without consuming the attempt the claim counted.
-- @param run_at: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'available', attempt = GREATEST(attempt - 1, 0), run_at = ?,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
