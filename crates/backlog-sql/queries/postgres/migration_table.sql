-- The table of applied migrations, created before the first.
-- @unprepared
CREATE TABLE IF NOT EXISTS backlog_migration (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)
