-- Per queue with jobs, how many are pending (available, scheduled, retrying, running, held or
-- waiting), from the counts the database keeps (backlog_count, schema version 19).
SELECT queue,
       COALESCE(SUM(n) FILTER (WHERE state IN ('available', 'scheduled', 'retrying', 'running', 'held', 'waiting')), 0)::int8
           AS pending
FROM backlog_count GROUP BY queue
HAVING SUM(n) <> 0
