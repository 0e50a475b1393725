-- Expired leases, oldest first, locked for job_rescue in the same transaction. SKIP LOCKED: a row
-- held open by a transaction-mode claimer (or another rescuer) is passed over instead of waited
-- on; a plain UPDATE … ORDER BY … LIMIT scanned into it and stalled every claimer's rescue.
-- FORCE INDEX: the lease index gives the order, so no sort locks rows beyond the LIMIT.
-- @param now: i64
-- @param limit: i64
SELECT id FROM backlog_job FORCE INDEX (backlog_job_lease)
WHERE state = 'running' AND lease_expires_at < ?
ORDER BY lease_expires_at
LIMIT ?
FOR UPDATE SKIP LOCKED
