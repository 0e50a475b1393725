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
-- that is available already, its group's turn, stays so: a run-now); so does one with parents not
-- yet ended (deps_left, schema version 20).
-- A completed job kept in backlog_job_done (version 15) that the action applies to (a retry)
-- moves back into the job table in the same statement, changed as the UPDATE changes a job
-- there. A job is in one table or the other, so one of the two parts changes it.
-- Returns a row for the job changed, none when the action does not apply.
WITH back AS (
    DELETE FROM backlog_job_done
    WHERE id = $5 AND state IN ($6, $7, $8)
    RETURNING *
), moved AS (
    INSERT INTO backlog_job
        (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
         lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
         attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard)
    SELECT id, queue, kind, payload,
           CASE WHEN $1 = 'available' AND group_key IS NOT NULL THEN 'waiting' ELSE $1 END,
           priority, COALESCE($2::bigint, run_at), CASE WHEN $3::boolean THEN 0 ELSE attempt END,
           max_attempts, lease_token, lease_owner, lease_expires_at, unique_key, errors, result,
           progress, created_at, attempted_at, $4::bigint, cancel_requested_at, trace_context,
           group_key, shard
    FROM back
    RETURNING id
), changed AS (
    UPDATE backlog_job
    SET state = CASE WHEN $1 = 'available' AND (group_key IS NOT NULL OR deps_left > 0)
                          AND state <> 'available' THEN 'waiting' ELSE $1 END,
        run_at = COALESCE($2::bigint, run_at),
        attempt = CASE WHEN $3::boolean THEN 0 ELSE attempt END, finished_at = $4::bigint
    WHERE id = $5 AND state IN ($6, $7, $8)
    RETURNING id
)
SELECT id FROM moved
UNION ALL
SELECT id FROM changed
