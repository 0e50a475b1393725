-- The jobs of a queue running now, through the lease index (there are as many as every
-- worker's concurrency, whatever the backlog).
-- @param queue: &str
SELECT count(*) FROM backlog_job
WHERE lease_expires_at IS NOT NULL AND state = 'running' AND queue = ?1
