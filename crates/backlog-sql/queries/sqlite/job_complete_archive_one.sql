-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Copies running jobs of one claim (one lease token) into the archive, completed. `ids`: a JSON
-- array of ids (see job_complete_delete_one). The DELETE of job_complete_delete_one follows in
-- the same transaction.
-- @param ids: &str
-- @param now: i64
-- @param token: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?2,
       cancel_requested_at, trace_context, group_key
FROM backlog_job
WHERE id IN (SELECT value FROM json_each(?1)) AND lease_token = ?3 AND state = 'running'
