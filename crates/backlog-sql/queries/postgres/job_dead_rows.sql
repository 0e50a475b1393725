-- Dead and live rows of a job table (backlog_job, backlog_job_done) as the cumulative statistics
-- count them (each backend reports its counts within about a second of its commits). NULL when
-- the table has none yet.
-- @param table: &str
SELECT n_dead_tup, n_live_tup FROM pg_stat_all_tables WHERE relid = to_regclass($1)
