-- Take the row when it is free or expired (a new term), renew it when it is ours (same term).
-- @param name: &str
-- @param holder: &str
-- @param now: i64
-- @param expires_at: i64
INSERT INTO backlog_leader (name, holder, term, expires_at) VALUES (?1, ?2, 1, ?4)
ON CONFLICT (name) DO UPDATE SET
    term = CASE WHEN backlog_leader.holder = excluded.holder THEN backlog_leader.term
                ELSE backlog_leader.term + 1 END,
    holder = excluded.holder,
    expires_at = excluded.expires_at
WHERE backlog_leader.holder = excluded.holder OR backlog_leader.expires_at < ?3
RETURNING term
