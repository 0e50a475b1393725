-- A queue's depth, sampled by the leader, stored in its row of the minute.
-- @param queue: &str
-- @param minute: i64
-- @param available: i64
-- @param scheduled: i64
-- @param running: i64
-- @param dead: i64
INSERT INTO backlog_stat (queue, minute, available, scheduled, running, dead_total)
VALUES (?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    available = VALUES(available),
    scheduled = VALUES(scheduled),
    running = VALUES(running),
    dead_total = VALUES(dead_total)
