-- The oldest dead jobs of a queue back to available, their attempts reset.
-- @param now: i64
-- @param queue: &str
-- @param limit: i64
UPDATE backlog_job
SET state = 'available', attempt = 0, run_at = ?1, finished_at = NULL
WHERE id IN (SELECT id FROM backlog_job WHERE queue = ?2 AND state = 'dead' ORDER BY id LIMIT ?3)
