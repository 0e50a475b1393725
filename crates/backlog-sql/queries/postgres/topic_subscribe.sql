-- @param topic: &str
-- @param queue: &str
-- @param now: i64
INSERT INTO backlog_subscription (topic, queue, created_at) VALUES ($1, $2, $3)
ON CONFLICT (topic, queue) DO NOTHING
