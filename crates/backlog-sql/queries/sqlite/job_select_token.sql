-- The jobs job_claim_token_* marked. All rows of one claim share its expiry, so the lease
-- index finds them.
-- @param expires: i64
-- @param token: i64
SELECT id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job
WHERE state = 'running' AND lease_expires_at = ?1 AND lease_token = ?2
