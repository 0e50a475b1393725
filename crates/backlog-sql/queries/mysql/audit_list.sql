-- Recorded actions, newest first. Values: before this id, queue (NULL for all; twice), limit.
SELECT id, at, actor, action, queue, job_id, CAST(detail AS CHAR) AS detail
FROM backlog_audit
WHERE id < ? AND (? IS NULL OR queue = ?)
ORDER BY id DESC
LIMIT ?
