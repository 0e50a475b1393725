-- Completes jobs job_claim_locked_* locked in this transaction (transaction claim mode) by
-- deleting them: the lock is their fence, so no token is read. Returns their ids.
-- No state in the WHERE: the rows are held by this transaction's lock, as claimed, and a
-- predicate like the claim index's own would let a plan made on an empty table walk that index
-- instead of the primary key (it did: thousands of rows read a claim).
-- @param ids: &[i64]
DELETE FROM backlog_job
WHERE id = ANY($1::bigint[])
RETURNING id
