-- Takes the cluster-wide migration lock when it is free or expired: one row, written by an
-- upsert. Two nodes writing it at once conflict at certification and one of them is rolled back
-- (a deadlock error), so at most one holder commits; migration_lock_holder reads who holds it.
-- Each assignment is guarded by the expiry, which the holder's assignment does not change.
-- @param holder: i64
-- @param expires_at: i64
-- @param now: i64
-- @bind holder, expires_at, now, now
INSERT INTO backlog_migration_lock (name, holder, expires_at) VALUES ('migrate', ?, ?)
ON DUPLICATE KEY UPDATE
    holder = IF(expires_at < ?, VALUES(holder), holder),
    expires_at = IF(expires_at < ?, VALUES(expires_at), expires_at)
