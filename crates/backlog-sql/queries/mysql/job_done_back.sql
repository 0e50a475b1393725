-- Moves a kept completed job back into the job table, unchanged (job_admin then changes it
-- there); job_done_back_delete removes it from the ring in the same transaction, after
-- job_done_back_lock locked it.
-- @table SLOT slot
-- @param id: i64
INSERT INTO backlog_job
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard)
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard
FROM backlog_job_done_/*SLOT*/ WHERE id = ?
