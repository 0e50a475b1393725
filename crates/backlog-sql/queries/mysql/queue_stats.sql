-- MySQL and MariaDB keep no counts (schema version 19 adds them on PostgreSQL and SQLite only,
-- migrations/mysql/0019_counts.sql): the counts are a scan of the jobs here, and this is also
-- what Backend::queue_stats_scan reads.
-- The second half counts the jobs `archive` retention moved to backlog_job_archive: one
-- statement, so a job moving there while this runs is counted once, in one place. The same holds
-- for completed jobs kept in the ring of tables (backlog_job_done, version 17), counted with the
-- job table's.
-- future: 0 due (or not available), 1 due later and never failed (attempt 0: scheduled), 2 due later
-- after a failed attempt (retrying).
-- @param now: i64
-- @param queue: Option<&str>
-- @bind now, queue, queue, queue, queue, queue, queue
SELECT queue, state, CASE WHEN state = 'available' AND run_at > ? THEN (CASE WHEN attempt = 0 THEN 1 ELSE 2 END) ELSE 0 END AS future,
       0 AS archived, COUNT(*) AS n
FROM backlog_job
WHERE (? IS NULL OR queue = ?)
GROUP BY queue, state, future
UNION ALL
SELECT queue, state, 0, 1, COUNT(*)
FROM backlog_job_archive
WHERE (? IS NULL OR queue = ?)
GROUP BY queue, state
UNION ALL
SELECT queue, state, 0, 0, COUNT(*)
FROM backlog_job_done
WHERE (? IS NULL OR queue = ?)
GROUP BY queue, state
