-- Expired leases, oldest first, locked for job_rescue in the same transaction. SKIP LOCKED: a row
-- held open by a transaction-mode claimer (or another rescuer) is passed over instead of waited
-- on; a plain UPDATE … ORDER BY … LIMIT scanned into it and stalled every claimer's rescue.
-- After: the rescue's floor (src/cursor.rs): only leases that expired since the last complete
-- pass, past the delete-marked entries of finished jobs that a held snapshot keeps purge from
-- removing; the smallest BIGINT for a full pass.
-- Two steps in one statement, as in job_claim_fifo: the derived table reads the lease index
-- without locking (a locking read there checks every delete-marked entry for an implicit
-- lock), then the rows are locked by primary key in expiry order and rechecked; STRAIGHT_JOIN
-- and the order by `c`'s column stop the locking at the LIMIT.
-- @param now: i64
-- @param after: i64
-- @param limit: i64
-- @bind now, after, limit, now, limit
SELECT j.id FROM (
    SELECT lease_expires_at, id FROM backlog_job FORCE INDEX (backlog_job_lease)
    WHERE state = 'running' AND lease_expires_at < ? AND lease_expires_at >= ?
    ORDER BY lease_expires_at
    LIMIT ?
) AS c
STRAIGHT_JOIN backlog_job AS j FORCE INDEX (PRIMARY) ON j.id = c.id
WHERE j.state = 'running' AND j.lease_expires_at < ?
ORDER BY c.lease_expires_at
LIMIT ?
FOR UPDATE SKIP LOCKED
