-- The next waiting job of each group that has room: fewer of its jobs available or running than
-- the queue's group concurrency. The next job is the first in enqueue order that is due (one
-- scheduled for later does not hold up the others). Read under group_lock; group_make_available
-- moves them (MySQL cannot read the table it updates in a subquery).
-- @param queue: &str
-- @param now: i64
-- @param groups: &str
-- The queue's group concurrency comes with each row: above 1, the caller reads again while jobs
-- move. So does its group rate limit: under one, the caller paces the promoted jobs
-- (group_rate_get, group_rate_set, job_pace).
-- @bind queue, now, queue, queue, queue, groups, queue, queue
SELECT (SELECT w.id FROM backlog_job w FORCE INDEX (backlog_job_group)
        WHERE w.queue = ? AND w.group_key = g.k AND w.state = 'waiting' AND w.run_at <= ?
        ORDER BY w.id LIMIT 1) AS id,
       g.k AS group_key,
       COALESCE((SELECT group_concurrency FROM backlog_queue WHERE name = ?), 1) AS room,
       (SELECT group_rate_limit FROM backlog_queue WHERE name = ?) AS group_rate_limit,
       COALESCE((SELECT group_rate_period_ms FROM backlog_queue WHERE name = ?), 1000)
           AS group_rate_period_ms
FROM JSON_TABLE(?, '$[*]' COLUMNS (k VARCHAR(255) CHARSET utf8mb4 COLLATE utf8mb4_bin PATH '$')) AS g
WHERE (SELECT count(*) FROM backlog_job a FORCE INDEX (backlog_job_group)
       WHERE a.queue = ? AND a.group_key = g.k AND a.state IN ('available', 'running'))
    < COALESCE((SELECT group_concurrency FROM backlog_queue WHERE name = ?), 1)
