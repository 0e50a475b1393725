-- @param progress: Option<String>
-- @param result: Option<String>
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET progress = COALESCE(?, progress), result = COALESCE(?, result)
WHERE id = ? AND lease_token = ? AND state = 'running'
