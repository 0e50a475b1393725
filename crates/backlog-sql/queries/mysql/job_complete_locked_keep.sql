-- Completes jobs a transaction claim (job_claim_fifo/lifo without job_claim_update) locked in
-- this transaction, kept: the attempt they ran as counted, the claim's time as the attempt's
-- start, the owner that ran them recorded. The lock is their fence, so no token is read. Found
-- by primary-key lookups in the JSON array's order, as in job_lease_locked (which says why).
-- @param owner: &str
-- @param attempted: i64
-- @param now: i64
-- @param ids: &str
-- @bind ids, owner, attempted, now
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN backlog_job d FORCE INDEX (PRIMARY) ON d.id = j.id
SET d.state = 'completed', d.attempt = d.attempt + 1, d.lease_owner = ?, d.attempted_at = ?,
    d.finished_at = ?, d.lease_token = NULL, d.lease_expires_at = NULL
