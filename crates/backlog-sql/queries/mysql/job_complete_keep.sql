-- Rows job_complete_lock found running with the caller's token (still locked; FORCE INDEX: see there).
-- @param now: i64
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = 'completed', finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (/*IDS*/)
