-- A job that completed into the archive table (retention `archive`) or was pruned into it.
-- @param id: i64
SELECT id, queue, kind, state, CAST(payload AS CHAR) AS payload, priority, run_at, attempt,
       max_attempts, lease_token, lease_owner, lease_expires_at, unique_key,
       CAST(errors AS CHAR) AS errors, CAST(result AS CHAR) AS result,
       CAST(progress AS CHAR) AS progress, created_at, attempted_at, finished_at,
       cancel_requested_at, trace_context, group_key
FROM backlog_job_archive WHERE id = ?
