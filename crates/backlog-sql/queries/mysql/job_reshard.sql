-- Moves up to `limit` available jobs of a queue that lie on a shard at or above its `shards` to
-- the shard that number falls on below it (shard mod shards), where claims look: after the count
-- was lowered, or when an insert used a count read before it was. One range of the claim index
-- (queue, 'available', shard >= shards). Jobs in other states move when they are available
-- again. Run for each queue with settings by each leader sweep and by a change of settings.
-- @param shards: i32
-- @param queue: &str
-- @param limit: i64
-- @bind shards, queue, shards, limit
UPDATE backlog_job FORCE INDEX (backlog_job_shard_claim)
SET shard = shard MOD ?
WHERE queue = ? AND state = 'available' AND shard >= ?
LIMIT ?
