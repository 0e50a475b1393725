-- Compacts the job table when another session's snapshot keeps its dead rows past a VACUUM:
-- its rows are copied, the table emptied (TRUNCATE frees its storage whatever any snapshot
-- sees) and the rows put back, under a lock waited for at most lock_wait_ms. NULL when the
-- table was left alone: more than max_live rows, another session's older transaction holds a
-- lock on it, or the lock did not come in time (migration 0014, backlog_job_compact).
-- @param max_live: i64
-- @param lock_wait_ms: i32
SELECT backlog_job_compact($1, $2)
