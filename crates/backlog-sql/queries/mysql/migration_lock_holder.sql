-- Who holds the cluster-wide migration lock (after migration_lock_take).
SELECT holder FROM backlog_migration_lock WHERE name = 'migrate'
