-- One statement: the CTE deletes one bounded batch (oldest first by id) and the INSERT moves
-- exactly those rows, so a job finishing between two statements can be neither lost nor kept.
-- The batch is picked as in job_prune_delete (see there for the NOT IN, ARRAY and SKIP LOCKED).
-- after_id: the batch takes ids above it (the leader's pruning cursor, src/cursor.rs: past the
-- dead index entries earlier batches left, which a held snapshot keeps vacuum from removing;
-- the smallest bigint for a pass from the head).
-- @param queue: &str
-- @param state: &str
-- @param finished_before: i64
-- @param limit: i64
-- @param after_id: i64
WITH moved AS (
    DELETE FROM backlog_job
    WHERE id = ANY(ARRAY(
        SELECT id FROM backlog_job
        WHERE queue = $1 AND state = $2 AND state NOT IN ('available', 'running')
          AND finished_at < $3 AND id > $5
        ORDER BY id LIMIT $4
        FOR UPDATE SKIP LOCKED))
    RETURNING *
)
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key
FROM moved
RETURNING id
