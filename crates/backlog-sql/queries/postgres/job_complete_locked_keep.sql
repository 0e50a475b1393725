-- Completes jobs job_claim_locked_* locked in this transaction (transaction claim mode), kept:
-- the attempt they ran as counted, the claim's time as the attempt's start, the owner that ran
-- them recorded. The lock is their fence, so no token is read. Returns their ids.
-- No state in the WHERE: the rows are held by this transaction's lock, as claimed, and a
-- predicate like the claim index's own would let a plan made on an empty table walk that index
-- instead of the primary key (it did: thousands of rows read a claim).
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql).
-- @param owner: &str
-- @param attempted: i64
-- @param now: i64
-- @param ids: &[i64]
WITH gone AS (
    DELETE FROM backlog_job
    WHERE id = ANY($4::bigint[])
    RETURNING *
)
INSERT INTO backlog_job_done
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard,
     slot)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt + 1, max_attempts, NULL,
       $1, NULL, unique_key, errors, result, progress, created_at,
       $2, $3, cancel_requested_at, trace_context, group_key, shard,
       (SELECT (($3 / period_us) % 16)::smallint FROM backlog_job_done_ring)
FROM gone
RETURNING id
