-- Finished jobs of a queue in a state, finished before a time: oldest first by id, in one
-- bounded batch.
-- `state NOT IN ('available', 'running')` is the WHERE of the index backlog_job_rest, written
-- out so that SQLite uses it: it does not infer it from the state compared (a full scan of the
-- job table otherwise).
-- @param queue: &str
-- @param state: &str
-- @param finished_before: i64
-- @param limit: i64
DELETE FROM backlog_job
WHERE id IN (SELECT id FROM backlog_job
             WHERE queue = ?1 AND state = ?2 AND state NOT IN ('available', 'running')
               AND finished_at < ?3 ORDER BY id LIMIT +?4)
