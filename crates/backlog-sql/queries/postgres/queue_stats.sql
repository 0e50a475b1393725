-- future is a boolean here (SQLite has no boolean type); $2 is cast because it may be NULL.
-- The second half counts the jobs `archive` retention moved to backlog_job_archive: one
-- statement, so a job moving there while this runs is counted once, in one place.
-- @param now: i64
-- @param queue: Option<&str>
SELECT queue, state, (state = 'available' AND run_at > $1) AS future, FALSE AS archived,
       COUNT(*) AS n
FROM backlog_job
WHERE ($2::text IS NULL OR queue = $2::text)
GROUP BY queue, state, future
UNION ALL
SELECT queue, state, FALSE, TRUE, COUNT(*)
FROM backlog_job_archive
WHERE ($2::text IS NULL OR queue = $2::text)
GROUP BY queue, state
