-- A job by id.
-- @param id: i64
SELECT id, queue, kind, state, payload, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key, deps_left
FROM backlog_job WHERE id = ?1
