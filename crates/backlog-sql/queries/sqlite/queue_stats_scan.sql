-- The counts of queue_stats.sql taken by a scan of every job instead of from backlog_count:
-- what the kept counts must equal (the conformance suite checks it; Backend::queue_stats_scan).
-- Job counts per queue, state and whether not yet due, of one queue or all (`queue` NULL).
-- The second half counts the jobs `archive` retention moved to backlog_job_archive: one
-- statement, so a job moving there while this runs is counted once, in one place.
-- future: 0 due (or not available), 1 due later and never failed (attempt 0: scheduled), 2 due later
-- after a failed attempt (retrying).
-- @param now: i64
-- @param queue: Option<&str>
SELECT queue, state, CASE WHEN state = 'available' AND run_at > ?1 THEN (CASE WHEN attempt = 0 THEN 1 ELSE 2 END) ELSE 0 END AS future,
       0 AS archived, COUNT(*) AS n
FROM backlog_job
WHERE (?2 IS NULL OR queue = ?2)
GROUP BY queue, state, future
UNION ALL
SELECT queue, state, 0, 1, COUNT(*)
FROM backlog_job_archive
WHERE (?2 IS NULL OR queue = ?2)
GROUP BY queue, state
