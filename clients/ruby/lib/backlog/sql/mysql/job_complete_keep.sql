-- Rows job_complete_lock found running with the caller's token (still locked; FORCE INDEX: see
-- there), kept: copied, completed, into the ring table completions write now (the view
-- backlog_job_done_current, turned by the leader; migrations/mysql/0017_job_done_ring.sql);
-- job_complete_delete removes them from the job table after, in the same transaction.
-- @param now: i64
-- @list IDS ids: i64
INSERT INTO backlog_job_done_current
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?,
       cancel_requested_at, trace_context, group_key, shard
FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/)
