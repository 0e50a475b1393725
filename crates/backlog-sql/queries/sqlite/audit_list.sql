-- Recorded actions, newest first. Values: before this id, queue (NULL for all), limit.
SELECT id, at, actor, action, queue, job_id, detail
FROM backlog_audit
WHERE id < ?1 AND (?2 IS NULL OR queue = ?2)
ORDER BY id DESC
LIMIT ?3
