-- Completes running jobs of one claim (one lease token): marks them completed, kept, returning
-- their ids. The ids are checked with one token instead of a token per id: the form for a worker
-- that completes a claim's jobs together. See job_complete_keep for the lock order.
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql).
-- @param ids: &[i64]
-- @param token: i64
-- @param now: i64
WITH gone AS (
    DELETE FROM backlog_job
    WHERE id = ANY($1::bigint[]) AND state = 'running'
      AND lease_token = $2::bigint
    RETURNING *
)
INSERT INTO backlog_job_done
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard,
     slot)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at,
       attempted_at, $3, cancel_requested_at, trace_context, group_key, shard,
       (SELECT (($3 / period_us) % 16)::smallint FROM backlog_job_done_ring)
FROM gone
RETURNING id
