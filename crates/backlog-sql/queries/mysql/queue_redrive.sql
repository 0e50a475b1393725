-- Ids from queue_dead_ids, one ? each: MySQL cannot read the table it updates in a subquery.
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = 'available', attempt = 0, run_at = ?, finished_at = NULL
WHERE id IN (/*IDS*/) AND state = 'dead'
