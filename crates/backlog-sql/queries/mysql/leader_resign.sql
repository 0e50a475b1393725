-- @param name: &str
-- @param holder: &str
UPDATE backlog_leader SET expires_at = 0 WHERE name = ? AND holder = ?
