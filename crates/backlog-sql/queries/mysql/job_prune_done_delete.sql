-- The rows job_prune_done_lock locked.
-- @table SLOT slot
-- @list IDS ids: i64
DELETE FROM backlog_job_done_/*SLOT*/ WHERE id IN (/*IDS*/)
