-- Per queue with jobs, how many are pending (available, running or held).
SELECT queue, SUM(CASE WHEN state IN ('available', 'running', 'held', 'waiting') THEN 1 ELSE 0 END) AS pending
FROM backlog_job GROUP BY queue
