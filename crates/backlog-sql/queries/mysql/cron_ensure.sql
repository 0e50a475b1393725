-- The schedule's row, created before any tick (bound as the smallest BIGINT) so that
-- cron_advance decides alone. Not one INSERT … ON DUPLICATE KEY UPDATE for both: sqlx connects
-- with CLIENT_FOUND_ROWS, under which an unchanged duplicate reports 1 row, like an insert.
-- @param name: &str
-- @param last_tick: i64
INSERT INTO backlog_cron (name, last_tick) VALUES (?, ?)
ON DUPLICATE KEY UPDATE name = name
