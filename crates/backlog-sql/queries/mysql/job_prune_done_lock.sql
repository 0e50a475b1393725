-- Locks the candidates job_prune_done_ids found in one table of the ring that are still there
-- (a retry may have moved one back), so that job_prune_done_archive copies exactly the rows
-- job_prune_done_delete removes.
-- @table SLOT slot
-- @list IDS ids: i64
SELECT id FROM backlog_job_done_/*SLOT*/ WHERE id IN (/*IDS*/) FOR UPDATE
