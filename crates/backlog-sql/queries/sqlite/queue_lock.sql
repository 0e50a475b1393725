-- A queue's limits for a claim under its global concurrency limit or rate limit. No lock to take: the claim
-- runs in a write transaction (BEGIN IMMEDIATE), and SQLite has one writer. No row: the queue
-- has no limit (and is not paused). The group rate limit comes along: the claim records the
-- starts in groups under one (group_rate_started).
-- @param queue: &str
SELECT paused, global_concurrency, rate_limit, rate_period_ms, rate_tokens, rate_at,
       group_rate_limit, group_rate_period_ms
FROM backlog_queue WHERE name = ?1
