-- Recorded actions, newest first; each filter NULL for any.
-- @param before_id: i64
-- @param queue: Option<&str>
-- @param actor: Option<&str>
-- @param action: Option<&str>
-- @param limit: i64
-- @bind before_id, queue, queue, actor, actor, action, action, limit
SELECT id, at, actor, action, queue, job_id, CAST(detail AS CHAR) AS detail
FROM backlog_audit
WHERE id < ? AND (? IS NULL OR queue = ?)
  AND (? IS NULL OR actor = ?) AND (? IS NULL OR action = ?)
ORDER BY id DESC
LIMIT ?
