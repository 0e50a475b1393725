-- A new job's parents (schema version 20), in the insert's transaction: the unfinished ones,
-- locked in id order as every statement that locks several jobs takes them, with their mark. A
-- parent ending at the same time waits for this transaction, then finds the mark and the edges;
-- one that ended first is not returned, and job_deps_states says how it ended.
-- @list IDS ids: i64
SELECT id, has_dependents FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND state IN ('available', 'running', 'held', 'waiting')
ORDER BY id
FOR UPDATE
