-- Makes the next waiting job of each group available where the group has room: fewer of its
-- jobs available or running than the queue's group concurrency. The next job is the first in
-- enqueue order that is due (one scheduled for later does not hold up the others). One job per
-- group per call; a caller with a group concurrency above 1 (returned with each row) calls
-- again while jobs move. Each row carries the queue's group rate limit too: under one, the
-- caller paces the promoted jobs (group_rate_get, group_rate_set, job_pace). No lock rows: it
-- runs in a write transaction, and SQLite has one writer. `groups`: a JSON array.
-- @param queue: &str
-- @param groups: &str
-- @param now: i64
UPDATE backlog_job SET state = 'available'
WHERE state = 'waiting' AND id IN (
    SELECT (SELECT w.id FROM backlog_job w
            WHERE w.queue = ?1 AND w.group_key = g.value AND w.state = 'waiting'
              AND w.run_at <= ?3
            ORDER BY w.id LIMIT 1)
    FROM json_each(?2) AS g
    WHERE (SELECT count(*) FROM backlog_job a
           WHERE a.queue = ?1 AND a.group_key = g.value AND a.state IN ('available', 'running'))
        < COALESCE((SELECT group_concurrency FROM backlog_queue WHERE name = ?1), 1)
)
RETURNING id, group_key,
          COALESCE((SELECT group_concurrency FROM backlog_queue WHERE name = ?1), 1),
          (SELECT group_rate_limit FROM backlog_queue WHERE name = ?1),
          COALESCE((SELECT group_rate_period_ms FROM backlog_queue WHERE name = ?1), 1000)
