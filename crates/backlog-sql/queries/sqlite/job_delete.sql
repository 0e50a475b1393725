-- An operator's delete: a job that is not running, from the job table (an archived job is
-- job_delete_archived's). Deleting a job frees its unique key at once.
-- @param id: i64
DELETE FROM backlog_job WHERE id = ?1 AND state <> 'running'
