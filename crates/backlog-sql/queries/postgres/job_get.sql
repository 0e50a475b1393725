-- JSONB columns read back as text: the core types hold JSON as text.
-- @param id: i64
SELECT id, queue, kind, state, payload::text AS payload, priority, run_at, attempt, max_attempts,
       lease_token, lease_owner, lease_expires_at, unique_key, errors::text AS errors,
       result::text AS result, progress::text AS progress, created_at, attempted_at, finished_at,
       cancel_requested_at, trace_context, group_key
FROM backlog_job WHERE id = $1
