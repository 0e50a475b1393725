-- Groups with a due waiting job and room to run it: what the leader's sweep promotes. A group's
-- next job is promoted when a job of the group finishes; this catches the rest (a worker that
-- died between its completion and the promotion, an operator's cancel, a scheduled job that came
-- due, rows inserted by plain SQL as 'waiting').
-- @param now: i64
-- @param limit: i64
SELECT DISTINCT w.queue, w.group_key FROM backlog_job w FORCE INDEX (backlog_job_lease)
WHERE w.state = 'waiting' AND w.run_at <= ? AND w.group_key IS NOT NULL
  AND (SELECT count(*) FROM backlog_job a FORCE INDEX (backlog_job_group)
       WHERE a.queue = w.queue AND a.group_key = w.group_key AND a.state IN ('available', 'running'))
      < COALESCE((SELECT group_concurrency FROM backlog_queue q WHERE q.name = w.queue), 1)
LIMIT ?
