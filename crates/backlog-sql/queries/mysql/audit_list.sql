-- Recorded actions, newest first.
-- @param before_id: i64
-- @param queue: Option<&str>
-- @param limit: i64
-- @bind before_id, queue, queue, limit
SELECT id, at, actor, action, queue, job_id, CAST(detail AS CHAR) AS detail
FROM backlog_audit
WHERE id < ? AND (? IS NULL OR queue = ?)
ORDER BY id DESC
LIMIT ?
