-- Empties (TRUNCATE) the partitions of backlog_job_done that the retention prune left with no
-- row, frees their storage whatever any snapshot sees, and returns how many; passes over one
-- that another session's older transaction holds or whose lock does not come within
-- lock_wait_ms (migration 0016, backlog_job_done_empty).
-- @param lock_wait_ms: i32
SELECT backlog_job_done_empty($1)
