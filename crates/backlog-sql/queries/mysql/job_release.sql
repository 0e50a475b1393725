-- Back to available without consuming the attempt the claim counted.
UPDATE backlog_job
SET state = 'available', attempt = GREATEST(attempt - 1, 0), run_at = ?,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
