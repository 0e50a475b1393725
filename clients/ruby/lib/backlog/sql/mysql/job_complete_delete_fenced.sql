-- The common case in one statement: the jobs of one lease token (a claim gives its whole batch
-- one token), fenced by it. FORCE INDEX (PRIMARY): rows are found and locked in id order, never
-- by a scan. Multi-table syntax because single-table DELETE takes no index hint.
-- @list IDS ids: i64
-- @param token: i64
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND lease_token = ? AND state = 'running'
