-- Completes jobs a transaction claim (job_claim_fifo/lifo without job_claim_update) locked in
-- this transaction, kept: the attempt they ran as counted, the claim's time as the attempt's
-- start, the owner that ran them recorded. The lock is their fence, so no token is read.
-- FORCE INDEX: see job_claim_update.
-- @param owner: &str
-- @param attempted: i64
-- @param now: i64
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = 'completed', attempt = attempt + 1, lease_owner = ?, attempted_at = ?,
    finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (/*IDS*/)
