-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Copies running jobs whose lease tokens still match into the archive, completed. `pairs`: the
-- (id, lease_token) pairs as JSON (see job_complete_delete). The DELETE of job_complete_delete
-- follows in the same transaction.
-- @param pairs: &str
-- @param now: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?2,
       cancel_requested_at, trace_context, group_key
FROM backlog_job
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
