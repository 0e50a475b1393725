UPDATE backlog_job
SET state = ?1, run_at = COALESCE(?2, run_at), attempt = CASE WHEN ?3 THEN 0 ELSE attempt END,
    finished_at = ?4
WHERE id = ?5 AND state IN (?6, ?7, ?8)
