-- The rate-limit times (theoretical arrival times) of ordered groups, read in the write
-- transaction of a promotion in a queue with a group rate limit. A group without one has not
-- started a job under the limit yet. `groups`: a JSON array.
-- @param queue: &str
-- @param groups: &str
SELECT group_key, rate_at FROM backlog_group
WHERE queue = ?1 AND group_key IN (SELECT value FROM json_each(?2))
