-- The table of applied migrations, created before the first.
-- @unprepared
CREATE TABLE IF NOT EXISTS backlog_migration (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)
