-- Marks parents locked by job_deps_lock as having dependents.
-- @list IDS ids: i64
UPDATE backlog_job SET has_dependents = TRUE WHERE id IN (/*IDS*/)
