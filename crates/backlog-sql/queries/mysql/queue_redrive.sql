-- Ids from queue_dead_ids, bound as a list: MySQL cannot read the table it updates in a subquery.
-- @param now: i64
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = 'available', attempt = 0, run_at = ?, finished_at = NULL
WHERE id IN (/*IDS*/) AND state = 'dead'
