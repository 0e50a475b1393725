-- Puts a just-inserted job in its ordered group: waiting, until group_next and
-- group_make_available (in the same transaction) make it available if it is its turn. No
-- claimer saw it available: the insert is not committed yet.
-- @param group: &str
-- @param id: i64
UPDATE backlog_job SET group_key = ?, state = 'waiting' WHERE id = ?
