-- @param to: &str
-- @param run_at: Option<i64>
-- @param reset_attempts: bool
-- @param finished_at: Option<i64>
-- @param id: i64
-- @param from_a: &str
-- @param from_b: &str
-- @param from_c: &str
-- @bind to, to, run_at, reset_attempts, finished_at, id, from_a, from_b, from_c
-- A job of an ordered group that would become available waits for its group's turn instead (one
-- that is available already, its group's turn, stays so: a run-now); so does one with parents not
-- yet ended (deps_left, schema version 20).
UPDATE backlog_job
SET state = CASE WHEN ? = 'available' AND (group_key IS NOT NULL OR deps_left > 0)
                      AND state <> 'available' THEN 'waiting' ELSE ? END,
    run_at = COALESCE(?, run_at), attempt = CASE WHEN ? THEN 0 ELSE attempt END,
    finished_at = ?
WHERE id = ? AND state IN (?, ?, ?)
