-- Releases migration_lock's lock.
SELECT RELEASE_LOCK(CONCAT('backlog_migrate:', LEFT(DATABASE(), 48)))
