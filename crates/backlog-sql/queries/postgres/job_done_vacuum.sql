-- VACUUM of backlog_job_done, as job_vacuum.sql of the job table.
-- @unprepared
VACUUM (SKIP_LOCKED) backlog_job_done
