-- Children whose last parent ended: available, due no earlier than now.
-- @param now: i64
-- @list IDS ids: i64
UPDATE backlog_job SET deps_left = 0, state = 'available', run_at = GREATEST(run_at, ?)
WHERE id IN (/*IDS*/)
