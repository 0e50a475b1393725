SELECT queue, state, CASE WHEN state = 'available' AND run_at > ? THEN 1 ELSE 0 END AS future,
       COUNT(*) AS n
FROM backlog_job
WHERE (? IS NULL OR queue = ?)
GROUP BY queue, state, future
