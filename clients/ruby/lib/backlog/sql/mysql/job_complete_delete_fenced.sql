-- The common case in one statement: the jobs of one lease token (a claim gives its whole batch
-- one token), fenced by it. FORCE INDEX (PRIMARY): rows are found and locked in id order, never
-- by a scan. Multi-table syntax because single-table DELETE takes no index hint.
-- Not a job with dependents (schema version 20): its children are released in the same
-- transaction, which this statement alone is not; the caller completes those in one.
-- @list IDS ids: i64
-- @param token: i64
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND lease_token = ? AND state = 'running' AND NOT has_dependents
