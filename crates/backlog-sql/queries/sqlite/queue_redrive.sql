-- The oldest dead jobs of a queue back to available, their attempts reset.
-- `state NOT IN ('available', 'running')` is the WHERE of the index backlog_job_rest, written
-- out so that SQLite uses it: it does not infer it from the state compared (a full scan of the
-- job table otherwise).
-- @param now: i64
-- @param queue: &str
-- @param limit: i64
-- A job of an ordered group waits for its group's turn.
UPDATE backlog_job
SET state = CASE WHEN group_key IS NULL THEN 'available' ELSE 'waiting' END, attempt = 0, run_at = ?1, finished_at = NULL
WHERE id IN (SELECT id FROM backlog_job WHERE queue = ?2 AND state = 'dead' AND state NOT IN ('available', 'running') ORDER BY id LIMIT +?3)
