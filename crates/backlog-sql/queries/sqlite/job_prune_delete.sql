DELETE FROM backlog_job
WHERE id IN (SELECT id FROM backlog_job
             WHERE queue = ?1 AND state = ?2 AND finished_at < ?3 ORDER BY id LIMIT ?4)
