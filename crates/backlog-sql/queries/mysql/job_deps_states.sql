-- Each of a new job's parents that is a job, with its state, wherever it is kept (the job
-- table and the completed jobs' ring, as backlog_job_all shows them; the archive). A parent not
-- here never was a job, or was pruned.
-- @list IDS ids: i64
SELECT id, state FROM backlog_job_all WHERE id IN (/*IDS*/)
