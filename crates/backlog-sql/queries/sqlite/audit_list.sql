-- Recorded actions, newest first.
-- @param before_id: i64
-- @param queue: Option<&str>
-- @param limit: i64
SELECT id, at, actor, action, queue, job_id, detail
FROM backlog_audit
WHERE id < ?1 AND (?2 IS NULL OR queue = ?2)
ORDER BY id DESC
LIMIT +?3
