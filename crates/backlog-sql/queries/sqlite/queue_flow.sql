-- What flow control holds in a queue: jobs running (against its global limit), and jobs
-- waiting for their ordered group's turn, in how many groups.
-- @param queue: &str
SELECT
    (SELECT count(*) FROM backlog_job
     WHERE lease_expires_at IS NOT NULL AND state = 'running' AND queue = ?1) AS running,
    (SELECT count(*) FROM backlog_job
     WHERE queue = ?1 AND group_key IS NOT NULL AND state = 'waiting') AS waiting,
    (SELECT count(DISTINCT group_key) FROM backlog_job
     WHERE queue = ?1 AND group_key IS NOT NULL AND state = 'waiting') AS waiting_groups
