-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Completes running jobs of one claim (one lease token): deletes them, returning their ids.
-- `ids`: a JSON array of ids, checked with one token instead of a token per id: the form for a
-- worker that completes a claim's jobs together.
-- @param ids: &str
-- @param token: i64
DELETE FROM backlog_job
WHERE id IN (SELECT value FROM json_each(?1)) AND lease_token = ?2 AND state = 'running'
RETURNING id
