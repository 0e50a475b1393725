-- Recorded actions, newest first; each filter NULL for any.
-- @param before_id: i64
-- @param queue: Option<&str>
-- @param actor: Option<&str>
-- @param action: Option<&str>
-- @param limit: i64
SELECT id, at, actor, action, queue, job_id, detail::text AS detail
FROM backlog_audit
WHERE id < $1 AND ($2::text IS NULL OR queue = $2::text)
  AND ($3::text IS NULL OR actor = $3::text) AND ($4::text IS NULL OR action = $4::text)
ORDER BY id DESC
LIMIT $5
