-- Completes jobs a transaction claim (job_claim_fifo/lifo without job_claim_update) locked in
-- this transaction by deleting them: the lock is their fence, so no token is read. Found by
-- primary-key lookups in the JSON array's order, as in job_lease_locked (which says why).
-- @param ids: &str
DELETE d FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN backlog_job d FORCE INDEX (PRIMARY) ON d.id = j.id
