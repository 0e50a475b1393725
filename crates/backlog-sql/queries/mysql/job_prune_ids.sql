-- Candidates of one bounded batch, oldest first by id. Not a locking read: a sort under FOR UPDATE
-- would lock every matching row before LIMIT applies; job_prune_lock locks the batch by id.
-- after_id: the batch takes ids above it (the leader's pruning cursor, src/cursor.rs: past the
-- dead index entries earlier batches left, which a held snapshot keeps vacuum from removing;
-- the smallest bigint for a pass from the head).
-- @param queue: &str
-- @param state: &str
-- @param finished_before: i64
-- @param after_id: i64
-- @param limit: i64
SELECT id FROM backlog_job
WHERE queue = ? AND state = ? AND finished_at < ? AND id > ?
ORDER BY id
LIMIT ?
