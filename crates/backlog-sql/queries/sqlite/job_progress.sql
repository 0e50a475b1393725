UPDATE backlog_job
SET progress = COALESCE(?1, progress), result = COALESCE(?2, result)
WHERE id = ?3 AND lease_token = ?4 AND state = 'running'
