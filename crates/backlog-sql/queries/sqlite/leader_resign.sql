-- Gives up the leadership, when held by this holder, by expiring it.
-- @param name: &str
-- @param holder: &str
UPDATE backlog_leader SET expires_at = 0 WHERE name = ?1 AND holder = ?2
