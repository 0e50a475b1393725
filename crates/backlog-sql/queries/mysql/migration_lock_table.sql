-- On a Galera cluster, where GET_LOCK is local to one node (or refused): the table of the
-- cluster-wide migration lock, created before it is taken. DDL runs in total order on every node.
-- @unprepared
CREATE TABLE IF NOT EXISTS backlog_migration_lock (name VARCHAR(64) PRIMARY KEY, holder BIGINT NOT NULL, expires_at BIGINT NOT NULL)
