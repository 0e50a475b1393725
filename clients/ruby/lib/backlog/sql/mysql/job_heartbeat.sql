-- No RETURNING in MySQL: job_heartbeat_cancel reads the cancel flag after this.
-- @param expires: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job SET lease_expires_at = ?
WHERE id = ? AND lease_token = ? AND state = 'running'
