-- @name job_select_token
-- All rows of one claim share its expiry, so the lease index finds them.
-- @param expires: i64
-- @param token: i64
SELECT
    -- @include claim_columns p= next=no
FROM backlog_job
WHERE state = 'running' AND lease_expires_at = ? AND lease_token = ?
