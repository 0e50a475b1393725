-- A no-op update rather than INSERT IGNORE, which would also swallow other errors.
-- @param name: &str
-- @param now: i64
-- @bind name, now, now
INSERT INTO backlog_queue (name, created_at, updated_at) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE name = name
