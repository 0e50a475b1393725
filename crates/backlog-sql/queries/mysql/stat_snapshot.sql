-- A queue's depth, sampled by the leader, stored in its row of the minute.
-- Values: queue, minute, available, scheduled, running, dead.
INSERT INTO backlog_stat (queue, minute, available, scheduled, running, dead_total)
VALUES (?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    available = VALUES(available),
    scheduled = VALUES(scheduled),
    running = VALUES(running),
    dead_total = VALUES(dead_total)
