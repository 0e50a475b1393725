-- Every registered worker, the longest running first.
SELECT id, host, pid, version, CAST(queues AS CHAR) AS queues, running, started_at, seen_at, expires_at
FROM backlog_worker ORDER BY started_at, id
