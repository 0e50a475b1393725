-- The oldest dead jobs of a queue, for redriving them one at a time.
-- @param queue: &str
-- @param limit: i64
SELECT id FROM backlog_job WHERE queue = ?1 AND state = 'dead' ORDER BY id LIMIT +?2
