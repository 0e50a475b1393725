-- Rows job_complete_lock found running with the caller's token (FORCE INDEX: see there); they
-- are deleted afterwards.
-- @param now: i64
-- @list IDS ids: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?,
       cancel_requested_at, trace_context, group_key
FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/)
