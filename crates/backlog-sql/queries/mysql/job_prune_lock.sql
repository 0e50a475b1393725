-- Locks the candidates job_prune_ids found (one ? each) that are still in the state pruned, so
-- that job_prune_archive copies exactly the rows job_prune_delete removes.
SELECT id FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/) AND state = ? FOR UPDATE
