-- job_deps_states for the archive.
-- @list IDS ids: i64
SELECT id, state FROM backlog_job_archive WHERE id IN (/*IDS*/)
