-- Puts a just-inserted job in its ordered group: waiting, until group_promote (in the same
-- transaction) makes it available if it is its turn. No claimer saw it available: the insert
-- is not committed yet.
-- @param group: &str
-- @param id: i64
UPDATE backlog_job SET group_key = ?1, state = 'waiting' WHERE id = ?2
