-- The jobs of a queue running now, through the lease index (there are as many as every
-- worker's concurrency, whatever the backlog).
-- @param queue: &str
SELECT count(*) FROM backlog_job FORCE INDEX (backlog_job_lease)
WHERE state = 'running' AND queue = ?
