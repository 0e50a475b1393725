-- The common case in one statement: the jobs of one lease token, fenced by it (see
-- job_complete_delete_fenced).
-- @param now: i64
-- @list IDS ids: i64
-- @param token: i64
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = 'completed', finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (/*IDS*/) AND lease_token = ? AND state = 'running'
