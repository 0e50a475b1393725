-- Leases jobs job_claim_locked_* locked in this transaction (transaction claim mode): they run on
-- after the commit as any claimed job, under one new lease. The primary-key scan of `id = ANY`
-- visits the rows in id order (see job_complete_delete).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param ids: &[i64]
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = $1, lease_owner = $2,
    lease_expires_at = $3, attempted_at = $4
WHERE id = ANY($5::bigint[]) AND state = 'available'
