-- Completes jobs a transaction claim (job_claim_fifo/lifo without job_claim_update) locked in
-- this transaction, kept: copied into the ring table completions write now (the view
-- backlog_job_done_current; migrations/mysql/0017_job_done_ring.sql) with the attempt they ran
-- as counted, the claim's time as the attempt's start and the owner that ran them recorded;
-- job_complete_locked_delete removes them from the job table after, in the same transaction.
-- The lock is their fence, so no token is read. Found by primary-key lookups in the JSON
-- array's order, as in job_lease_locked (which says why).
-- @param owner: &str
-- @param attempted: i64
-- @param now: i64
-- @param ids: &str
-- @bind owner, attempted, now, ids
INSERT INTO backlog_job_done_current
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard)
SELECT d.id, d.queue, d.kind, d.payload, 'completed', d.priority, d.run_at, d.attempt + 1,
       d.max_attempts, NULL, ?, NULL, d.unique_key, d.errors, d.result, d.progress, d.created_at,
       ?, ?, d.cancel_requested_at, d.trace_context, d.group_key, d.shard
FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN backlog_job d FORCE INDEX (PRIMARY) ON d.id = j.id
