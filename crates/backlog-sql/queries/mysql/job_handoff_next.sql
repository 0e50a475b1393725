-- The first step of handing the turns of a worker's finished jobs in their ordered groups
-- straight to each group's next job (job_handoff_take the second): each finished job still
-- running in a group, locked (no rescue takes it before the completion in this transaction),
-- with its lease token (the caller keeps the rows still under its own) and its group's next
-- job: the first due waiting job in enqueue order. MySQL cannot read the table it updates in a
-- subquery, so the next jobs are read here and moved by id.
-- @param now: i64
-- @list IDS ids: i64
SELECT d.id, d.lease_token,
       (SELECT w.id FROM backlog_job w FORCE INDEX (backlog_job_group)
        WHERE w.queue = d.queue AND w.group_key = d.group_key AND w.state = 'waiting'
          AND w.run_at <= ?
        ORDER BY w.id LIMIT 1) AS next
FROM backlog_job d FORCE INDEX (PRIMARY)
WHERE d.id IN (/*IDS*/) AND d.state = 'running' AND d.group_key IS NOT NULL
FOR UPDATE
