-- What flow control holds in a queue: jobs running (against its global limit), and jobs
-- waiting for their ordered group's turn, in how many groups.
-- @param queue: &str
-- @bind queue, queue, queue
SELECT
    (SELECT count(*) FROM backlog_job FORCE INDEX (backlog_job_lease)
     WHERE state = 'running' AND queue = ?) AS running,
    (SELECT count(*) FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
     WHERE queue = ? AND state = 'waiting') AS waiting,
    (SELECT count(DISTINCT group_key) FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
     WHERE queue = ? AND state = 'waiting') AS waiting_groups
