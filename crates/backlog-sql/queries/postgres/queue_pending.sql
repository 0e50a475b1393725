-- COUNT(*) FILTER: a BIGINT count per queue, zero for queues holding only finished jobs.
SELECT queue, COUNT(*) FILTER (WHERE state IN ('available', 'running', 'held', 'waiting')) AS pending
FROM backlog_job GROUP BY queue
