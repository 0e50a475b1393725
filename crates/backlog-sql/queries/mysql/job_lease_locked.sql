-- Leases jobs a transaction claim (job_claim_fifo/lifo without job_claim_update) locked in this
-- transaction: running, the attempt counted, under the claim's token until the lease expires.
-- The ids come as a JSON array, each row found by its own primary-key lookup in the array's
-- order (STRAIGHT_JOIN), by the primary key whatever the statistics say (FORCE INDEX): the
-- IN-list form of job_claim_update, run while other claimers took rows of the same shards,
-- deadlocked on this machine, and so did this join without the hint on a small table (it
-- scanned backlog_job, waiting on rows other claims hold). A deadlock here rolls the claim back.
-- @param ids: &str
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @bind ids, token, owner, expires, now
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN backlog_job d FORCE INDEX (PRIMARY) ON d.id = j.id
SET d.state = 'running', d.attempt = d.attempt + 1, d.lease_token = ?, d.lease_owner = ?,
    d.lease_expires_at = ?, d.attempted_at = ?
