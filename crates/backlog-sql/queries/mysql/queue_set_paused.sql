-- @param name: &str
-- @param paused: bool
-- @param now: i64
-- @bind name, paused, now, now
INSERT INTO backlog_queue (name, paused, created_at, updated_at) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE paused = VALUES(paused), updated_at = VALUES(updated_at)
