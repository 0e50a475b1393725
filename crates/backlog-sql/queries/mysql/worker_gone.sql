-- A worker that stops deletes its row.
-- @param id: &str
DELETE FROM backlog_worker WHERE id = ?
