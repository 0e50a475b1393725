-- Also tells the worker whether cancellation of the job was requested.
-- @param expires: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job SET lease_expires_at = $1
WHERE id = $2 AND lease_token = $3 AND state = 'running'
RETURNING cancel_requested_at IS NOT NULL AS cancel_requested
