-- A running job's progress and result, each kept when NULL, while its lease token matches.
-- @param progress: Option<String>
-- @param result: Option<String>
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET progress = COALESCE(?1, progress), result = COALESCE(?2, result)
WHERE id = ?3 AND lease_token = ?4 AND state = 'running'
