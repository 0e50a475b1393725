-- An operator's action on one job: moves it to state `to` when it is in one of the states it may
-- leave (`from_1`..`from_3`, padded by repetition); `run_at` and `finished_at` when not NULL.
-- @param to: &str
-- @param run_at: Option<i64>
-- @param reset_attempts: bool
-- @param finished_at: Option<i64>
-- @param id: i64
-- @param from_a: &str
-- @param from_b: &str
-- @param from_c: &str
-- A job of an ordered group that would become available waits for its group's turn instead (one
-- that is available already, its group's turn, stays so: a run-now); so does one with parents not
-- yet ended (deps_left, schema version 20).
UPDATE backlog_job
SET state = CASE WHEN ?1 = 'available' AND (group_key IS NOT NULL OR deps_left > 0)
                      AND state <> 'available' THEN 'waiting' ELSE ?1 END,
    run_at = COALESCE(?2, run_at), attempt = CASE WHEN ?3 THEN 0 ELSE attempt END,
    finished_at = ?4
WHERE id = ?5 AND state IN (?6, ?7, ?8)
