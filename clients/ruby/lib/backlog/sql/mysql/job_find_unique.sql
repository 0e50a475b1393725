-- unique_active is the unique key while the job is unfinished, else NULL (no partial indexes).
-- A locking read: it sees the latest committed row even in a caller's REPEATABLE READ transaction
-- whose snapshot predates it (job_insert's duplicate check already locked that row).
-- @param queue: &str
-- @param unique_key: &str
SELECT id FROM backlog_job WHERE queue = ? AND unique_active = ? FOR UPDATE
