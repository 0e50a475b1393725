-- A periodic schedule as its leader declares it: what it is, its jobs' queue and kind, its next
-- tick. The last tick fired (cron_advance.sql) is left as it is; a new row has fired none (0).
-- @param name: &str
-- @param schedule: &str
-- @param queue: &str
-- @param kind: Option<&str>
-- @param next_tick: Option<i64>
-- @param declared_at: i64
INSERT INTO backlog_cron (name, last_tick, schedule, queue, kind, next_tick, declared_at)
VALUES (?, 0, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    schedule = VALUES(schedule),
    queue = VALUES(queue),
    kind = VALUES(kind),
    next_tick = VALUES(next_tick),
    declared_at = VALUES(declared_at)
