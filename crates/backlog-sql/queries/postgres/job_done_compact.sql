-- Compacts backlog_job_done as job_compact.sql compacts the job table (migration 0015,
-- backlog_job_done_compact): NULL when left alone.
-- @param max_live: i64
-- @param lock_wait_ms: i32
SELECT backlog_job_done_compact($1, $2)
