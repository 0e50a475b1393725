-- The counts of queue_stats.sql taken by a scan of every job instead of from backlog_count:
-- what the kept counts must equal (the conformance suite checks it; Backend::queue_stats_scan).
-- future is 0 for a due (or not available) job, 1 for one due later that never failed
-- (attempt 0: scheduled), 2 for one due later after a failed attempt (retrying); archived is 0 or 1; as
-- in the other dialects. $2 is cast because it may be NULL.
-- The second half counts the jobs `archive` retention moved to backlog_job_archive: one
-- statement, so a job moving there while this runs is counted once, in one place. The same holds
-- for completed jobs kept in backlog_job_done (version 15), counted with the job table's.
-- @param now: i64
-- @param queue: Option<&str>
SELECT queue, state,
       CASE WHEN state = 'available' AND run_at > $1 THEN (CASE WHEN attempt = 0 THEN 1 ELSE 2 END) ELSE 0 END::int8 AS future,
       0::int8 AS archived, COUNT(*) AS n
FROM backlog_job
WHERE ($2::text IS NULL OR queue = $2::text)
GROUP BY queue, state, future
UNION ALL
SELECT queue, state, 0::int8, 1::int8, COUNT(*)
FROM backlog_job_archive
WHERE ($2::text IS NULL OR queue = $2::text)
GROUP BY queue, state
UNION ALL
SELECT queue, state, 0::int8, 0::int8, COUNT(*)
FROM backlog_job_done
WHERE ($2::text IS NULL OR queue = $2::text)
GROUP BY queue, state
