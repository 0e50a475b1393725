-- New jobs that wait for `left` parents each: waiting (not yet committed: no claimer saw them).
-- @param left: i32
-- @list IDS ids: i64
UPDATE backlog_job SET state = 'waiting', deps_left = ? WHERE id IN (/*IDS*/)
