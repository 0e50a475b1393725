-- Makes the next waiting job of each group available where the group has room: fewer of its
-- jobs available or running than the queue's group concurrency. The next job is the first in
-- enqueue order that is due (one scheduled for later does not hold up the others). One job per
-- group per call; a caller with a group concurrency above 1 (returned with each row) calls again
-- while jobs move. Each row carries the queue's group rate limit too: under one, the caller paces
-- the promoted jobs (group_rate_get, group_rate_set, job_pace). Run under group_lock in the same
-- transaction.
-- @param queue: &str
-- @param groups: Vec<String>
-- @param now: i64
UPDATE backlog_job j SET state = 'available'
WHERE j.id = ANY(ARRAY(
    SELECT (SELECT w.id FROM backlog_job w
            WHERE w.queue = $1 AND w.group_key = g AND w.state = 'waiting' AND w.run_at <= $3
            ORDER BY w.id LIMIT 1) AS id
    FROM unnest($2::text[]) AS t(g)
    WHERE (SELECT count(*) FROM backlog_job a
           WHERE a.queue = $1 AND a.group_key = g AND a.state IN ('available', 'running'))
        < COALESCE((SELECT group_concurrency FROM backlog_queue WHERE name = $1), 1)
)) AND j.state = 'waiting'
RETURNING j.id, j.group_key,
          COALESCE((SELECT group_concurrency FROM backlog_queue WHERE name = $1), 1),
          (SELECT group_rate_limit FROM backlog_queue WHERE name = $1),
          COALESCE((SELECT group_rate_period_ms FROM backlog_queue WHERE name = $1), 1000)
