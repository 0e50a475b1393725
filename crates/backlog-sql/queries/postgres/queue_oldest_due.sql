-- Per queue, the run_at of its oldest due available job: how far behind its workers are. Index
-- probes, not a scan of the queue's jobs: for each queue with jobs to run (the kept counts,
-- backlog_count), each shard, and each priority present (a loose scan of the claim index, one
-- probe per priority), the head's run_at, which is the priority's oldest; the queue's oldest is
-- the least of them. O(queues × shards × priorities) probes whatever the depth.
-- @param now: i64
WITH RECURSIVE heads AS (
    SELECT q.queue, s.i AS shard,
           (SELECT min(j.priority) FROM backlog_job j
            WHERE j.queue = q.queue AND j.shard = s.i AND j.state = 'available') AS p
    FROM (SELECT c.queue, COALESCE(max(bq.shards), 1) AS shards
          FROM backlog_count c LEFT JOIN backlog_queue bq ON bq.name = c.queue
          WHERE c.state IN ('available', 'scheduled', 'retrying')
          GROUP BY c.queue HAVING sum(c.n) > 0) AS q
    CROSS JOIN LATERAL generate_series(0, q.shards - 1) AS s(i)
    UNION ALL
    SELECT h.queue, h.shard,
           (SELECT min(j.priority) FROM backlog_job j
            WHERE j.queue = h.queue AND j.shard = h.shard AND j.state = 'available'
              AND j.priority > h.p)
    FROM heads h WHERE h.p IS NOT NULL
)
SELECT h.queue, MIN(f.run_at) AS oldest
FROM heads h
CROSS JOIN LATERAL (SELECT j.run_at FROM backlog_job j
                    WHERE j.queue = h.queue AND j.shard = h.shard AND j.state = 'available'
                      AND j.priority = h.p
                    ORDER BY j.run_at LIMIT 1) AS f
WHERE h.p IS NOT NULL AND f.run_at <= $1
GROUP BY h.queue
