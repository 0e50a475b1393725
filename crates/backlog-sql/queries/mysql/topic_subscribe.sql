-- A no-op update rather than INSERT IGNORE, which would also swallow other errors.
-- @param topic: &str
-- @param queue: &str
-- @param now: i64
INSERT INTO backlog_subscription (topic, queue, created_at) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE topic = topic
