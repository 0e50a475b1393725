-- Back to available without consuming the attempt the claim counted.
-- @param run_at: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'available', attempt = MAX(attempt - 1, 0), run_at = ?1,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ?2 AND lease_token = ?3 AND state = 'running'
