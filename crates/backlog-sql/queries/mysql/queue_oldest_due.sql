-- Per queue, the run_at of its oldest due available job: how far behind its workers are. Index
-- probes, not a scan of the queue's jobs: for each queue with jobs (a loose index scan of the
-- claim index's first column), each shard, and each priority present (a loose scan, one
-- probe per priority), the head's run_at, which is the priority's oldest; the queue's oldest is
-- the least of them. O(queues × shards × priorities) probes whatever the depth.
-- @param now: i64
WITH RECURSIVE q AS (
    SELECT j.queue, COALESCE(MAX(bq.shards), 1) AS shards
    FROM (SELECT DISTINCT queue FROM backlog_job) AS j
    LEFT JOIN backlog_queue bq ON bq.name = j.queue
    GROUP BY j.queue
), s AS (
    SELECT 0 AS i UNION ALL SELECT i + 1 FROM s WHERE i < 255
), heads AS (
    SELECT q.queue, s.i AS shard,
           (SELECT MIN(j.priority) FROM backlog_job j
            WHERE j.queue = q.queue AND j.state = 'available' AND j.shard = s.i) AS p
    FROM q JOIN s ON s.i < q.shards
    UNION ALL
    SELECT h.queue, h.shard,
           (SELECT MIN(j.priority) FROM backlog_job j
            WHERE j.queue = h.queue AND j.state = 'available' AND j.shard = h.shard
              AND j.priority > h.p)
    FROM heads h WHERE h.p IS NOT NULL
)
SELECT f.queue, MIN(f.head) AS oldest
FROM (SELECT h.queue,
             (SELECT j.run_at FROM backlog_job j
              WHERE j.queue = h.queue AND j.state = 'available' AND j.shard = h.shard
                AND j.priority = h.p
              ORDER BY j.run_at LIMIT 1) AS head
      FROM heads h WHERE h.p IS NOT NULL) AS f
WHERE f.head <= ?
GROUP BY f.queue
