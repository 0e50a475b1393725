-- Per queue, the run_at of its oldest due available job: how far behind its workers are. Index
-- probes, not a scan of the queue's jobs: for each queue with jobs to run (the kept counts,
-- backlog_count), and each priority present (a loose scan of the claim index, one
-- probe per priority), the head's run_at, which is the priority's oldest; the queue's oldest is
-- the least of them. O(queues × priorities) probes whatever the depth.
-- @param now: i64
WITH RECURSIVE q AS (
    SELECT queue FROM backlog_count
    WHERE state IN ('available', 'scheduled', 'retrying')
    GROUP BY queue HAVING SUM(n) > 0
), heads(queue, p) AS (
    SELECT q.queue,
           (SELECT MIN(j.priority) FROM backlog_job j
            WHERE j.queue = q.queue AND j.state = 'available')
    FROM q
    UNION ALL
    SELECT h.queue,
           (SELECT MIN(j.priority) FROM backlog_job j
            WHERE j.queue = h.queue AND j.state = 'available' AND j.priority > h.p)
    FROM heads h WHERE h.p IS NOT NULL
)
SELECT queue, MIN(head) AS oldest
FROM (SELECT h.queue,
             (SELECT j.run_at FROM backlog_job j
              WHERE j.queue = h.queue AND j.state = 'available' AND j.priority = h.p
              ORDER BY j.run_at LIMIT 1) AS head
      FROM heads h WHERE h.p IS NOT NULL)
WHERE head <= ?1
GROUP BY queue
