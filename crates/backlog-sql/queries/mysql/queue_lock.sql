-- Takes a queue's row lock for a claim under its global concurrency limit or rate limit: claimers of the
-- queue take it one after the other, each counting (queue_running, a later statement that sees
-- what the one before committed) and claiming what the limits leave, then storing the rate
-- limit's bucket (queue_rate_take) and the starts in groups under a group rate limit
-- (group_rate_started). No row: the queue has no limit (and is not paused).
-- @param queue: &str
SELECT paused, global_concurrency, rate_limit, rate_period_ms, rate_tokens, rate_at,
       group_rate_limit, group_rate_period_ms
FROM backlog_queue WHERE name = ? FOR UPDATE
