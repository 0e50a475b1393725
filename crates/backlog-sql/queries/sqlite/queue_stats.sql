SELECT queue, state, CASE WHEN state = 'available' AND run_at > ?1 THEN 1 ELSE 0 END AS future,
       COUNT(*) AS n
FROM backlog_job
WHERE (?2 IS NULL OR queue = ?2)
GROUP BY queue, state, future
