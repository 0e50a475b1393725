-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- job_complete_keep_one without reading back the ids: for a completion that checks only how
-- how many rows it changed (reading them back costs CPU on every completion).
-- @param ids: &str
-- @param now: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'completed', finished_at = ?2, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (SELECT value FROM json_each(?1)) AND lease_token = ?3 AND state = 'running'
