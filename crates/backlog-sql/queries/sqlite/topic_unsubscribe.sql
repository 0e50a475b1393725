-- Unsubscribes a queue from a topic.
-- @param topic: &str
-- @param queue: &str
DELETE FROM backlog_subscription WHERE topic = ?1 AND queue = ?2
