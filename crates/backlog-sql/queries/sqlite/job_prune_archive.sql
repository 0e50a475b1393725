-- Oldest first by id, in one bounded batch; job_prune_delete removes the same rows after.
-- `state NOT IN ('available', 'running')` is the WHERE of the index backlog_job_rest, written
-- out so that SQLite uses it: it does not infer it from the state compared (a full scan of the
-- job table otherwise).
-- @param queue: &str
-- @param state: &str
-- @param finished_before: i64
-- @param limit: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key
FROM backlog_job
WHERE id IN (SELECT id FROM backlog_job
             WHERE queue = ?1 AND state = ?2 AND state NOT IN ('available', 'running')
               AND finished_at < ?3 ORDER BY id LIMIT +?4)
