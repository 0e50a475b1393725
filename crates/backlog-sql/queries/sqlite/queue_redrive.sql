UPDATE backlog_job
SET state = 'available', attempt = 0, run_at = ?1, finished_at = NULL
WHERE id IN (SELECT id FROM backlog_job WHERE queue = ?2 AND state = 'dead' ORDER BY id LIMIT ?3)
