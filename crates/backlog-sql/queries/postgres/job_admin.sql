-- Casts: $2 and $4 may be NULL, and PostgreSQL wants a type for a NULL it cannot infer.
-- @param to: &str
-- @param run_at: Option<i64>
-- @param reset_attempts: bool
-- @param finished_at: Option<i64>
-- @param id: i64
-- @param from_a: &str
-- @param from_b: &str
-- @param from_c: &str
-- A job of an ordered group that would become available waits for its group's turn instead (one
-- that is available already, its group's turn, stays so: a run-now).
UPDATE backlog_job
SET state = CASE WHEN $1 = 'available' AND group_key IS NOT NULL
                      AND state <> 'available' THEN 'waiting' ELSE $1 END,
    run_at = COALESCE($2::bigint, run_at),
    attempt = CASE WHEN $3::boolean THEN 0 ELSE attempt END, finished_at = $4::bigint
WHERE id = $5 AND state IN ($6, $7, $8)
