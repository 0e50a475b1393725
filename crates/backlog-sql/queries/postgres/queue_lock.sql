-- Takes a queue's row lock for a claim under its global concurrency limit: claimers of the
-- queue take it one after the other, each counting (queue_running, a later statement that sees
-- what the one before committed) and claiming what the limit leaves. No row: the queue has no
-- limit (and is not paused).
-- @param queue: &str
SELECT paused, global_concurrency FROM backlog_queue WHERE name = $1 FOR UPDATE
