-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Completes running jobs of one claim (one lease token): marks them completed, kept, returning
-- their ids. `ids`: a JSON array of ids, checked with one token (see job_complete_delete_one).
-- @param ids: &str
-- @param now: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'completed', finished_at = ?2, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (SELECT value FROM json_each(?1)) AND lease_token = ?3 AND state = 'running'
RETURNING id
