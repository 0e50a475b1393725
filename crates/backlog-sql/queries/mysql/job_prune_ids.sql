-- Candidates of one bounded batch, oldest first by id. Not a locking read: a sort under FOR UPDATE
-- would lock every matching row before LIMIT applies; job_prune_lock locks the batch by id.
-- @param queue: &str
-- @param state: &str
-- @param finished_before: i64
-- @param limit: i64
SELECT id FROM backlog_job
WHERE queue = ? AND state = ? AND finished_at < ?
ORDER BY id
LIMIT ?
