-- Oldest first by id, in one bounded batch. The redundant NOT IN lets a generic plan (state is a
-- parameter) use the partial index backlog_job_rest; = ANY(ARRAY(…)) deletes by primary key
-- instead of hash-joining the whole table. SKIP LOCKED: rows an operator is changing right now
-- wait for the next batch.
-- after_id: the batch takes ids above it (the leader's pruning cursor, src/cursor.rs: past the
-- dead index entries earlier batches left, which a held snapshot keeps vacuum from removing;
-- the smallest bigint for a pass from the head).
-- @param queue: &str
-- @param state: &str
-- @param finished_before: i64
-- @param limit: i64
-- @param after_id: i64
DELETE FROM backlog_job
WHERE id = ANY(ARRAY(
    SELECT id FROM backlog_job
    WHERE queue = $1 AND state = $2 AND state NOT IN ('available', 'running') AND finished_at < $3
      AND id > $5
    ORDER BY id LIMIT $4
    FOR UPDATE SKIP LOCKED))
RETURNING id
