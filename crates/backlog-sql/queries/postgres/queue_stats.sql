-- future is a boolean here (SQLite has no boolean type); $2 is cast because it may be NULL.
SELECT queue, state, (state = 'available' AND run_at > $1) AS future, COUNT(*) AS n
FROM backlog_job
WHERE ($2::text IS NULL OR queue = $2::text)
GROUP BY queue, state, future
