-- Whether cancellation of the job was requested, read after job_heartbeat (fenced again: no row
-- means the lease was lost in between).
-- @param id: i64
-- @param token: i64
SELECT cancel_requested_at IS NOT NULL AS cancel_requested
FROM backlog_job WHERE id = ? AND lease_token = ? AND state = 'running'
