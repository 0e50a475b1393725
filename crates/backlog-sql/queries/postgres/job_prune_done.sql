-- Retention `keep` for completed jobs kept apart in backlog_job_done (version 15): deletes one
-- bounded batch of a queue's jobs that finished before the window, oldest finish first, and
-- returns their finish times. SKIP LOCKED: a row a retry is moving back right now waits for the
-- next batch.
-- after_finished: the batch takes finish times from it on (the leader's pruning cursor,
-- src/cursor.rs: past the index entries earlier batches left, which a held snapshot keeps vacuum
-- from removing; the smallest bigint for a pass from the head). From it, not past it: jobs that
-- finished in the same microsecond as the last one a batch took are not passed over.
-- @param queue: &str
-- @param finished_before: i64
-- @param limit: i64
-- @param after_finished: i64
DELETE FROM backlog_job_done
WHERE id = ANY(ARRAY(
    SELECT id FROM backlog_job_done
    WHERE queue = $1 AND finished_at < $2 AND finished_at >= $4
    ORDER BY finished_at LIMIT $3
    FOR UPDATE SKIP LOCKED))
RETURNING finished_at
