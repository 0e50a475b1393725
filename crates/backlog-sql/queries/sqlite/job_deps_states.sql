-- Each of a new job's parents that is a job, with its state, wherever it is kept (the job
-- table, the archive). A parent not here never was a job, or was pruned. `ids`: a JSON array.
-- @param ids: &str
SELECT id, state FROM backlog_job WHERE id IN (SELECT value FROM json_each(?1))
UNION ALL
SELECT id, state FROM backlog_job_archive WHERE id IN (SELECT value FROM json_each(?1))
