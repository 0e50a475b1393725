-- Takes a queue's row lock for a claim under its global concurrency limit or rate limit: claimers of the
-- queue take it one after the other, each counting (queue_running, a later statement that sees
-- what the one before committed) and claiming what the limits leave, then storing the rate
-- limit's bucket (queue_rate_take) and the starts in groups under a group rate limit
-- (group_rate_started). No row: the queue has no limit (and is not paused).
--
-- It also turns sequential scans off for the rest of the transaction (set_config(…, true)):
-- queue_running counts through the lease index, whose rows are as many as the jobs running,
-- while a table that vacuum has not caught up with looked cheaper to scan whole to the planner
-- (measured on a 661 MB table of 1,000 live and 4.9 million dead rows: a parallel sequential
-- scan of 128 ms a claim; through the index, 11 ms). The statements after it in the
-- transaction are planned then, with index paths only.
-- @param queue: &str
SELECT paused, global_concurrency, rate_limit, rate_period_ms, rate_tokens, rate_at,
       group_rate_limit, group_rate_period_ms
FROM backlog_queue WHERE name = $1 AND set_config('enable_seqscan', 'off', true) = 'off'
FOR UPDATE
