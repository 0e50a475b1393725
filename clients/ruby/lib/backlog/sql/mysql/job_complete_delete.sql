-- Rows job_complete_lock found running with the caller's token (still locked). Multi-table
-- syntax because single-table DELETE takes no index hint (see job_complete_lock for why).
-- @list IDS ids: i64
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/)
