-- @param topic: &str
SELECT queue FROM backlog_subscription WHERE topic = ? ORDER BY queue
