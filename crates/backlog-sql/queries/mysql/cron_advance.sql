-- Changes a row only for a tick later than the last one fired: the job is enqueued in the same
-- transaction only when this changed a row (the WHERE makes matched rows equal changed rows).
-- @param name: &str
-- @param tick: i64
-- @bind tick, name, tick
UPDATE backlog_cron SET last_tick = ? WHERE name = ? AND last_tick < ?
