-- JSON columns as CHAR: sqlx cannot decode MySQL 8's native JSON type into a string.
-- One statement over the job table and the completed jobs kept in the ring of tables
-- (backlog_job_done, version 17), so a job completing while this runs is found in one of them:
-- the move is one transaction. The view reads one row of each ring table by primary key.
-- @param id: i64
-- @bind id, id
SELECT id, queue, kind, state, CAST(payload AS CHAR) AS payload, priority, run_at, attempt,
       max_attempts, lease_token, lease_owner, lease_expires_at, unique_key,
       CAST(errors AS CHAR) AS errors, CAST(result AS CHAR) AS result,
       CAST(progress AS CHAR) AS progress, created_at, attempted_at, finished_at,
       cancel_requested_at, trace_context, group_key, deps_left
FROM backlog_job WHERE id = ?
UNION ALL
SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
       lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
       CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
       cancel_requested_at, trace_context, group_key, 0
FROM backlog_job_done WHERE id = ?
LIMIT 1
