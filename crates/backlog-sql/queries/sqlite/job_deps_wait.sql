-- New jobs that wait for `left` parents each: waiting. `ids`: a JSON array.
-- @param left: i32
-- @param ids: &str
UPDATE backlog_job SET state = 'waiting', deps_left = ?1 WHERE id IN (SELECT value FROM json_each(?2))
