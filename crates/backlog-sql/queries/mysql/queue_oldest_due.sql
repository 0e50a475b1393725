-- Per queue, the run_at of its oldest due available job: how far behind its workers are. A loose
-- index scan of the claim index (queue, state, shard, priority, run_at, id): one probe per queue,
-- shard and priority present, each reading that group's first run_at ("Using index for
-- group-by"), whatever the depth; the queue's oldest is the least of its groups' heads that are
-- due. Correlated per-group subqueries read each group's whole index range on MariaDB (40,000
-- rows a queue at 1,000,000 jobs); this form reads one entry a group.
-- @param now: i64
SELECT h.queue, MIN(h.head) AS oldest
FROM (SELECT queue, MIN(run_at) AS head
      FROM backlog_job
      WHERE state = 'available'
      GROUP BY queue, state, shard, priority) AS h
WHERE h.head <= ?
GROUP BY h.queue
