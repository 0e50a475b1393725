-- Completes running jobs whose lease tokens still match: marks them completed, kept, returning
-- their ids. (id, lease_token) pairs come as two parallel arrays (see job_complete_delete for the
-- lock order).
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql), into the partition of their finish time's slot
-- (version 16: a ring the leader empties whole once pruned; the slot, backlog_job_done_slot() written
-- out, is read once a statement: a call of that SQL function would be planned at every statement).
-- @param ids: &[i64]
-- @param tokens: &[i64]
-- @param now: i64
WITH gone AS (
    DELETE FROM backlog_job
    WHERE id = ANY($1::bigint[]) AND state = 'running'
      AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
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
