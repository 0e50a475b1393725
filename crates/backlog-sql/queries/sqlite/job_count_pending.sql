SELECT COUNT(*) FROM backlog_job
WHERE state IN ('available', 'running') AND queue IN (SELECT value FROM json_each(?1))
  AND (?2 IS NULL OR kind IN (SELECT value FROM json_each(?2)))
  AND (?3 IS NULL OR state = 'running' OR run_at <= ?3)
