-- The queues subscribed to a topic.
-- @param topic: &str
SELECT queue FROM backlog_subscription WHERE topic = ?1 ORDER BY queue
