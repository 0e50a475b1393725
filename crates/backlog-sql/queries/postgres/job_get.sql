-- JSONB columns read back as text: the core types hold JSON as text.
-- One statement over the job table and backlog_job_done (completed jobs kept apart, version 15),
-- so a job completing while this runs is found in one of them: the move is one statement.
-- @param id: i64
SELECT id, queue, kind, state, payload::text AS payload, priority, run_at, attempt, max_attempts,
       lease_token, lease_owner, lease_expires_at, unique_key, errors::text AS errors,
       result::text AS result, progress::text AS progress, created_at, attempted_at, finished_at,
       cancel_requested_at, trace_context, group_key, deps_left
FROM backlog_job WHERE id = $1
UNION ALL
SELECT id, queue, kind, state, payload::text, priority, run_at, attempt, max_attempts,
       lease_token, lease_owner, lease_expires_at, unique_key, errors::text, result::text,
       progress::text, created_at, attempted_at, finished_at, cancel_requested_at, trace_context,
       group_key, 0
FROM backlog_job_done WHERE id = $1
LIMIT 1
