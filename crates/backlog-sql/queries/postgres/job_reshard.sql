-- Moves available jobs that lie on a shard at or above their queue's `shards` to the shard that
-- number falls on below it (shard mod shards), where claims look: after the count was lowered,
-- or when an insert read the count just before it was. Up to `limit` jobs per queue, one index
-- probe per queue (LATERAL); jobs in other states move when they are available again. Run by
-- each leader sweep and by a change of a queue's settings.
-- @param limit: i64
WITH moved AS (
    SELECT m.id
    FROM backlog_queue AS q
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = q.name AND shard >= q.shards AND state = 'available'
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ) AS m
)
UPDATE backlog_job AS j SET shard = j.shard % (SELECT shards FROM backlog_queue WHERE name = j.queue)
WHERE j.id = ANY(ARRAY(SELECT id FROM moved))
