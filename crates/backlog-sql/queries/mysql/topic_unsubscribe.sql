-- @param topic: &str
-- @param queue: &str
DELETE FROM backlog_subscription WHERE topic = ? AND queue = ?
