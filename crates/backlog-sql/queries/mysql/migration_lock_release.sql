-- Releases the cluster-wide migration lock if it is still ours.
-- @param holder: i64
DELETE FROM backlog_migration_lock WHERE name = 'migrate' AND holder = ?
