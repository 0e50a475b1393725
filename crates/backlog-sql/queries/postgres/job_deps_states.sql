-- Each of a new job's parents that is a job, with its state, wherever it is kept (the job
-- table, the completed jobs, the archive). A parent not here never was a job, or was pruned.
-- @param ids: &[i64]
SELECT id, state FROM backlog_job WHERE id = ANY($1)
UNION ALL
SELECT id, state FROM backlog_job_done WHERE id = ANY($1)
UNION ALL
SELECT id, state FROM backlog_job_archive WHERE id = ANY($1)
