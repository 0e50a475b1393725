-- Job counts per queue, state and whether not yet due, of one queue or all (`queue` NULL).
-- The second half counts the jobs `archive` retention moved to backlog_job_archive: one
-- statement, so a job moving there while this runs is counted once, in one place.
-- @param now: i64
-- @param queue: Option<&str>
SELECT queue, state, CASE WHEN state = 'available' AND run_at > ?1 THEN 1 ELSE 0 END AS future,
       0 AS archived, COUNT(*) AS n
FROM backlog_job
WHERE (?2 IS NULL OR queue = ?2)
GROUP BY queue, state, future
UNION ALL
SELECT queue, state, 0, 1, COUNT(*)
FROM backlog_job_archive
WHERE (?2 IS NULL OR queue = ?2)
GROUP BY queue, state
