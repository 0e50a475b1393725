-- Locks the candidates job_prune_ids found that are still in the state pruned, so
-- that job_prune_archive copies exactly the rows job_prune_delete removes.
-- @list IDS ids: i64
-- @param state: &str
SELECT id FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/) AND state = ? FOR UPDATE
