-- Children that wait on: `n` of their parents ended.
-- @param n: i32
-- @list IDS ids: i64
UPDATE backlog_job SET deps_left = deps_left - ? WHERE id IN (/*IDS*/)
