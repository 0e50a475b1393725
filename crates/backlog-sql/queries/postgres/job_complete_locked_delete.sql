-- Completes jobs job_claim_locked_* locked in this transaction (transaction claim mode) by
-- deleting them: the lock is their fence, so no token is read. Returns their ids.
-- @param ids: &[i64]
DELETE FROM backlog_job
WHERE id = ANY($1::bigint[]) AND state = 'available'
RETURNING id
