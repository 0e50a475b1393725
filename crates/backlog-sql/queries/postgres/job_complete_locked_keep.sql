-- Completes jobs job_claim_locked_* locked in this transaction (transaction claim mode), kept:
-- the attempt they ran as counted, the claim's time as the attempt's start, the owner that ran
-- them recorded. The lock is their fence, so no token is read. Returns their ids.
-- No state in the WHERE: the rows are held by this transaction's lock, as claimed, and a
-- predicate like the claim index's own would let a plan made on an empty table walk that index
-- instead of the primary key (it did: thousands of rows read a claim).
-- @param owner: &str
-- @param attempted: i64
-- @param now: i64
-- @param ids: &[i64]
UPDATE backlog_job
SET state = 'completed', attempt = attempt + 1, lease_owner = $1, attempted_at = $2,
    finished_at = $3, lease_token = NULL, lease_expires_at = NULL
WHERE id = ANY($4::bigint[])
RETURNING id
