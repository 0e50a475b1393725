-- Recorded actions, newest first; each filter NULL for any.
-- @param before_id: i64
-- @param queue: Option<&str>
-- @param actor: Option<&str>
-- @param action: Option<&str>
-- @param limit: i64
SELECT id, at, actor, action, queue, job_id, detail
FROM backlog_audit
WHERE id < ?1 AND (?2 IS NULL OR queue = ?2)
  AND (?3 IS NULL OR actor = ?3) AND (?4 IS NULL OR action = ?4)
ORDER BY id DESC
LIMIT +?5
