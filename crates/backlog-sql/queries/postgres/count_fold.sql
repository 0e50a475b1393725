-- Folds every slot of backlog_count but the one written now into that one (one row per key), a
-- key of jobs due later whose time has come into `available`; passes over a slot whose lock does
-- not come within lock_wait_ms (migration 0019, backlog_count_fold).
-- @param lock_wait_ms: i32
SELECT backlog_count_fold($1)
