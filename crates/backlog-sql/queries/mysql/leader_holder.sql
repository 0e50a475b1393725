-- Read in leader_elect's transaction: the caller leads if the row carries its holder and expiry.
-- @param name: &str
SELECT holder, term, expires_at FROM backlog_leader WHERE name = ?
