-- @param now: i64
-- @param id: i64
UPDATE backlog_job SET cancel_requested_at = $1 WHERE id = $2 AND state = 'running'
