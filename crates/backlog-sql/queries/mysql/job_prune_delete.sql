-- The rows job_prune_lock locked. Multi-table syntax: single-table DELETE takes no index hint.
-- @list IDS ids: i64
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/)
