-- Records that jobs of ordered groups started, in a claim under the queue's group rate limit:
-- each group's rate-limit time moves to at least this start plus one step of the limit
-- (`started_by`). Promotion paced each job from the time it was made due; a job claimed later
-- than that started later, and the group's next jobs are paced from when it did.
-- @param queue: &str
-- @param groups: Vec<String>
-- @param started_by: i64
UPDATE backlog_group SET rate_at = GREATEST(COALESCE(rate_at, $3), $3)
WHERE queue = $1 AND group_key = ANY($2::text[])
