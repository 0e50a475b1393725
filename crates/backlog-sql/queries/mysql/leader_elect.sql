-- Take the row when it is free or expired (a new term), renew it when it is ours (same term).
-- No conditional DO UPDATE in MySQL: each assignment is guarded instead. MySQL evaluates them
-- left to right with the values already assigned, so term goes first (it reads the old holder),
-- and the guard still holds for expires_at after holder changed (it is ours then). VALUES(col)
-- rather than MySQL 8's row alias, which MariaDB does not have. leader_holder reads the result.
-- @param name: &str
-- @param holder: &str
-- @param now: i64
-- @param expires_at: i64
-- @bind name, holder, expires_at, now, now, now
INSERT INTO backlog_leader (name, holder, term, expires_at) VALUES (?, ?, 1, ?)
ON DUPLICATE KEY UPDATE
    term = IF(holder = VALUES(holder) OR expires_at < ?,
              IF(holder = VALUES(holder), term, term + 1), term),
    holder = IF(holder = VALUES(holder) OR expires_at < ?, VALUES(holder), holder),
    expires_at = IF(holder = VALUES(holder) OR expires_at < ?, VALUES(expires_at), expires_at)
