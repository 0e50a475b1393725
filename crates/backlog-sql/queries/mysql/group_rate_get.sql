-- The rate-limit times (theoretical arrival times) of ordered groups, read under group_lock by
-- a promotion in a queue with a group rate limit. A group without one has not started a job
-- under the limit yet.
-- @param queue: &str
-- @param groups: &str
-- @bind queue, groups
SELECT group_key, rate_at FROM backlog_group
WHERE queue = ? AND group_key IN (
    SELECT g.k FROM JSON_TABLE(?, '$[*]' COLUMNS (
        k VARCHAR(255) CHARSET utf8mb4 COLLATE utf8mb4_bin PATH '$')) AS g)
