-- SUM() is DECIMAL in MySQL: cast back to an integer.
SELECT queue,
       CAST(SUM(CASE WHEN state IN ('available', 'running', 'held', 'waiting') THEN 1 ELSE 0 END) AS SIGNED)
           AS pending
FROM backlog_job GROUP BY queue
