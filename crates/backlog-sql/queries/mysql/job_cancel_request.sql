-- @param now: i64
-- @param id: i64
UPDATE backlog_job SET cancel_requested_at = ? WHERE id = ? AND state = 'running'
