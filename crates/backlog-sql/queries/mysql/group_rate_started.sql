-- Records that jobs of ordered groups started, in a claim under the queue's group rate limit:
-- each group's rate-limit time moves to at least this start plus one step of the limit
-- (`started_by`). Promotion paced each job from the time it was made due; a job claimed later
-- than that started later, and the group's next jobs are paced from when it did.
-- @param queue: &str
-- @param groups: &str
-- @param started_by: i64
-- @bind started_by, started_by, queue, groups
UPDATE backlog_group SET rate_at = GREATEST(COALESCE(rate_at, ?), ?)
WHERE queue = ? AND group_key IN (
    SELECT g.k FROM JSON_TABLE(?, '$[*]' COLUMNS (
        k VARCHAR(255) CHARSET utf8mb4 COLLATE utf8mb4_bin PATH '$')) AS g)
