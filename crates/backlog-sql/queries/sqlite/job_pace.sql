-- Holds back jobs just promoted in groups whose rate limit does not let them start yet: each
-- stays available, due when the limit lets it start. `paced`: a JSON array of [id, run_at].
-- @param paced: &str
UPDATE backlog_job
SET run_at = (SELECT p.value ->> 1 FROM json_each(?1) AS p WHERE p.value ->> 0 = backlog_job.id)
WHERE id IN (SELECT p.value ->> 0 FROM json_each(?1) AS p) AND state = 'available'
