-- The rows job_prune_done_lock locked, of a queue whose retention is `archive`; deleted after.
-- @table SLOT slot
-- @list IDS ids: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key
FROM backlog_job_done_/*SLOT*/
WHERE id IN (/*IDS*/)
