-- Changes a row only for a tick later than the last one fired: the job is enqueued in the same
-- transaction only when this changed a row.
-- @param name: &str
-- @param tick: i64
INSERT INTO backlog_cron (name, last_tick) VALUES (?1, ?2)
ON CONFLICT (name) DO UPDATE SET last_tick = excluded.last_tick
WHERE backlog_cron.last_tick < excluded.last_tick
