SELECT COUNT(*) FROM backlog_job
WHERE state IN ('available', 'running') AND queue IN (SELECT value FROM json_each(?1))
