-- A queue's depth, sampled by the leader, stored in its row of the minute.
-- @param queue: &str
-- @param minute: i64
-- @param available: i64
-- @param scheduled: i64
-- @param running: i64
-- @param dead: i64
INSERT INTO backlog_stat (queue, minute, available, scheduled, running, dead_total)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (queue, minute) DO UPDATE SET
    available = excluded.available,
    scheduled = excluded.scheduled,
    running = excluded.running,
    dead_total = excluded.dead_total
