-- The row job_done_back copied into the job table.
-- @table SLOT slot
-- @param id: i64
DELETE FROM backlog_job_done_/*SLOT*/ WHERE id = ?
