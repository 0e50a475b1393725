-- job_done_empty for MySQL 8: waits at most a second for the table (readers queue behind it
-- meanwhile), on a connection of its own.
-- @unprepared
-- @table SLOT slot
SET SESSION lock_wait_timeout = 1;
TRUNCATE TABLE backlog_job_done_/*SLOT*/
