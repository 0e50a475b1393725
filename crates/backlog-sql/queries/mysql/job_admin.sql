UPDATE backlog_job
SET state = ?, run_at = COALESCE(?, run_at), attempt = CASE WHEN ? THEN 0 ELSE attempt END,
    finished_at = ?
WHERE id = ? AND state IN (?, ?, ?)
