-- The rows job_prune_lock locked (one ? each). Multi-table syntax: single-table DELETE takes no
-- index hint.
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/)
