-- A new job's parents (schema version 20), in the insert's transaction: the unfinished ones are
-- locked, in id order as every statement that locks several jobs takes them, and marked as
-- having dependents (a job whose mark is set already is not written again); returns them. A
-- parent ending at the same time waits for this transaction, then finds the mark and the edges
-- (its release runs in the trigger of the statement that ends it); one that ended first is not
-- returned, and job_deps_states says how it ended.
-- @param ids: &[i64]
WITH parents AS (
    SELECT id, has_dependents FROM backlog_job
    WHERE id = ANY($1) AND state IN ('available', 'running', 'held', 'waiting')
    ORDER BY id
    FOR UPDATE
), marked AS (
    UPDATE backlog_job SET has_dependents = true
    WHERE id IN (SELECT id FROM parents WHERE NOT has_dependents)
)
SELECT id FROM parents
