-- Per queue with jobs, how many are pending (available, scheduled, retrying, running, held or
-- waiting), from the counts the database keeps (backlog_count, schema version 19).
-- SUM() is DECIMAL in MySQL: cast back to an integer.
SELECT queue,
       CAST(SUM(CASE WHEN state IN ('available', 'scheduled', 'retrying', 'running', 'held', 'waiting')
                     THEN n ELSE 0 END) AS SIGNED) AS pending
FROM backlog_count GROUP BY queue
HAVING SUM(n) <> 0
