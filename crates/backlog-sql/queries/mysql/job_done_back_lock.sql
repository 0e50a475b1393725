-- Locks a kept completed job in its table of the ring before job_done_back moves it; no row when
-- another session moved it first.
-- @table SLOT slot
-- @param id: i64
SELECT id FROM backlog_job_done_/*SLOT*/ WHERE id = ? FOR UPDATE
