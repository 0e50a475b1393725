-- Leases jobs job_claim_locked_* locked in this transaction (transaction claim mode): they run on
-- after the commit as any claimed job, under one new lease. The primary-key scan of `id = ANY`
-- visits the rows in id order (see job_complete_delete).
-- No state in the WHERE: the rows are held by this transaction's lock, as claimed, and a
-- predicate like the claim index's own would let a plan made on an empty table walk that index
-- instead of the primary key (it did: thousands of rows read a claim).
-- @param ids: &[i64]
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = $2, lease_owner = $3,
    lease_expires_at = $4, attempted_at = $5
WHERE id = ANY($1::bigint[])
