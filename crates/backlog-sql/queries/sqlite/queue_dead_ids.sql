-- The oldest dead jobs of a queue, for redriving them one at a time.
-- `state NOT IN ('available', 'running')` is the WHERE of the index backlog_job_rest, written
-- out so that SQLite uses it: it does not infer it from the state compared (a full scan of the
-- job table otherwise).
-- @param queue: &str
-- @param limit: i64
SELECT id FROM backlog_job WHERE queue = ?1 AND state = 'dead' AND state NOT IN ('available', 'running') ORDER BY id LIMIT +?2
