-- Dead and live rows of a job table (backlog_job, or backlog_job_done: the sum over its
-- partitions) as the cumulative statistics count them (each backend reports its counts within
-- about a second of its commits). NULL when the table has none yet.
-- @param table: &str
SELECT SUM(n_dead_tup)::bigint, SUM(n_live_tup)::bigint FROM pg_stat_all_tables
WHERE relid = to_regclass($1)
   OR relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass($1))
