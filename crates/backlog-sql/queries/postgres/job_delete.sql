-- An operator's delete: a job that is not running, from the job table or the completed jobs
-- kept apart (version 15). A job is in one table or the other, so one of the two parts deletes
-- it; an archived job is job_delete_archived's. Deleting a job frees its unique key at once.
-- @param id: i64
WITH live AS (
    DELETE FROM backlog_job WHERE id = $1 AND state <> 'running' RETURNING id
), kept AS (
    DELETE FROM backlog_job_done WHERE id = $1 RETURNING id
)
SELECT id FROM live
UNION ALL
SELECT id FROM kept
