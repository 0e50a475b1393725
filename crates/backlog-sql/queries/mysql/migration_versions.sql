-- The migrations applied so far.
SELECT version FROM backlog_migration
