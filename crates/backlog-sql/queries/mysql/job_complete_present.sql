-- After a fenced completion changed fewer rows than asked: the ids still holding another token
-- or state (their lease was lost). Deleted rows are absent; kept ones are completed at `now`.
-- @list IDS ids: i64
-- @param now: i64
SELECT id FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND NOT (state = 'completed' AND finished_at = ? AND lease_token IS NULL)
