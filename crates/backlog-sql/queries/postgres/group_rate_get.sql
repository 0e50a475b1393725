-- The rate-limit times (theoretical arrival times) of ordered groups, read under group_lock by
-- a promotion in a queue with a group rate limit. A group without one has not started a job
-- under the limit yet.
-- @param queue: &str
-- @param groups: Vec<String>
SELECT group_key, rate_at FROM backlog_group WHERE queue = $1 AND group_key = ANY($2::text[])
