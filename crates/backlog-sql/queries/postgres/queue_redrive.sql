-- FOR UPDATE after ORDER BY id: rows are locked in id order, like every multi-row writer here.
-- = ANY(ARRAY(…)): the batch is an InitPlan, run once. As `id IN (SELECT … LIMIT … FOR UPDATE)`
-- the planner may rescan the subquery per outer row, and each rescan locks the next dead rows:
-- a redrive of 2 moved 3.
-- @param now: i64
-- @param queue: &str
-- @param limit: i64
-- A job of an ordered group waits for its group's turn.
UPDATE backlog_job
SET state = CASE WHEN group_key IS NULL THEN 'available' ELSE 'waiting' END, attempt = 0, run_at = $1, finished_at = NULL
WHERE id = ANY(ARRAY(
    SELECT id FROM backlog_job WHERE queue = $2 AND state = 'dead' ORDER BY id LIMIT $3 FOR UPDATE
))
AND state = 'dead'
