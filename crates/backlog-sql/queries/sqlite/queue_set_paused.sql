-- Pauses or resumes a queue, creating its settings row when it has none.
-- @param name: &str
-- @param paused: bool
-- @param now: i64
INSERT INTO backlog_queue (name, paused, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
