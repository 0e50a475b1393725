-- A queue's depth, sampled by the leader, stored in its row of the minute.
-- Values: queue, minute, available, scheduled, running, dead.
INSERT INTO backlog_stat (queue, minute, available, scheduled, running, dead_total)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (queue, minute) DO UPDATE SET
    available = excluded.available,
    scheduled = excluded.scheduled,
    running = excluded.running,
    dead_total = excluded.dead_total
