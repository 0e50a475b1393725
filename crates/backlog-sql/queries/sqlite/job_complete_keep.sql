UPDATE backlog_job
SET state = 'completed', finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE state = 'running' AND (id, lease_token) IN (VALUES /*PAIRS*/)
RETURNING id
