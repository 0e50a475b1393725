-- Groups of a queue held up by a job not due yet (an available job of a group scheduled for
-- later): a failed job waiting to retry (group_on_failure 'block'; it has attempts), or one its
-- group's rate limit holds back (none yet). With how many jobs wait behind it; most first.
-- @param queue: &str
-- @param now: i64
-- @param limit: i64
SELECT b.group_key, b.id, b.run_at, b.attempt,
       (SELECT count(*) FROM backlog_job w FORCE INDEX (backlog_job_group)
        WHERE w.queue = b.queue AND w.group_key = b.group_key AND w.state = 'waiting') AS waiting
FROM backlog_job b FORCE INDEX (backlog_job_shard_claim)
WHERE b.queue = ? AND b.state = 'available' AND b.run_at > ? AND b.group_key IS NOT NULL
ORDER BY waiting DESC, b.id
LIMIT ?
