-- A new job's parents (schema version 20), in the insert's transaction: the unfinished ones are
-- marked as having dependents; returns them. One not returned ended already, or is not a job
-- (job_deps_states tells). SQLite has one writer: no parent ends while this transaction runs.
-- `ids`: a JSON array.
-- @param ids: &str
UPDATE backlog_job SET has_dependents = 1
WHERE id IN (SELECT value FROM json_each(?1)) AND state IN ('available', 'running', 'held', 'waiting')
RETURNING id
