-- Jobs with dependents that a fenced completion of retention `delete` left alone (it completes
-- only jobs without: theirs need the release in the same transaction), still running under
-- `token`, locked.
-- @list IDS ids: i64
-- @param token: i64
SELECT id FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND lease_token = ? AND state = 'running' AND has_dependents
FOR UPDATE
