-- The edges from jobs that ended (schema version 20): (parent, child, policy).
-- @list IDS ids: i64
SELECT parent_id, child_id, policy FROM backlog_job_dep WHERE parent_id IN (/*IDS*/)
