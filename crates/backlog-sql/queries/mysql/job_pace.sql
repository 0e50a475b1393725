-- Holds back a job just promoted in a group whose rate limit does not let it start yet: it stays
-- available, due when the limit lets it start.
-- @param run_at: i64
-- @param id: i64
UPDATE backlog_job FORCE INDEX (PRIMARY) SET run_at = ? WHERE id = ? AND state = 'available'
