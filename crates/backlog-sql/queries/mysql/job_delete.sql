-- An operator's delete: a job that is not running, from the job table. A completed job kept in
-- the ring of tables (version 17) is first moved back into the job table in a transaction of its
-- own (Dialect::admin_prepare), as a retry moves it; an archived job is job_delete_archived's.
-- Deleting a job frees its unique key at once.
-- @param id: i64
DELETE FROM backlog_job WHERE id = ? AND state <> 'running'
