-- @param name: &str
-- @param now: i64
INSERT INTO backlog_queue (name, created_at, updated_at) VALUES ($1, $2, $2)
ON CONFLICT (name) DO NOTHING
