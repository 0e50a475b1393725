-- @generated from templates/mysql/job_select_token.sql by tests/templates.rs: edit the template
-- All rows of one claim share its expiry, so the lease index finds them.
-- @param expires: i64
-- @param token: i64
SELECT
    id, kind, CAST(payload AS CHAR) AS payload, priority, attempt,
    max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job
WHERE state = 'running' AND lease_expires_at = ? AND lease_token = ?
