-- Oldest first by id, in one bounded batch. The redundant NOT IN lets a generic plan (state is a
-- parameter) use the partial index backlog_job_rest; = ANY(ARRAY(…)) deletes by primary key
-- instead of hash-joining the whole table. SKIP LOCKED: rows an operator is changing right now
-- wait for the next batch.
-- @param queue: &str
-- @param state: &str
-- @param finished_before: i64
-- @param limit: i64
DELETE FROM backlog_job
WHERE id = ANY(ARRAY(
    SELECT id FROM backlog_job
    WHERE queue = $1 AND state = $2 AND state NOT IN ('available', 'running') AND finished_at < $3
    ORDER BY id LIMIT $4
    FOR UPDATE SKIP LOCKED))
