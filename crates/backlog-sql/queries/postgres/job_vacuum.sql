-- SKIP_LOCKED: if another VACUUM (autovacuum's) is at work on the table, leave it be rather than
-- wait behind it.
-- @unprepared
VACUUM (SKIP_LOCKED) backlog_job
