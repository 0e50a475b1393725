-- The children still waiting for parents, locked in id order, with the parents they still wait
-- for and whether they have children of their own.
-- @list IDS ids: i64
SELECT id, deps_left, has_dependents FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND state = 'waiting' AND deps_left > 0
ORDER BY id
FOR UPDATE
