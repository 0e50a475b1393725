-- The schema version: the last migration applied (0 before the first).
SELECT COALESCE(MAX(version), 0) AS version FROM backlog_migration
