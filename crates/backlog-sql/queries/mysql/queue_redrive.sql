-- Ids from queue_dead_ids, bound as a list: MySQL cannot read the table it updates in a subquery.
-- @param now: i64
-- @list IDS ids: i64
-- A job of an ordered group waits for its group's turn.
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = CASE WHEN group_key IS NULL THEN 'available' ELSE 'waiting' END, attempt = 0, run_at = ?, finished_at = NULL
WHERE id IN (/*IDS*/) AND state = 'dead'
