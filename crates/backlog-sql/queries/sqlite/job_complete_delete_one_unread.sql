-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- job_complete_delete_one without reading back the ids: for a completion that checks only how
-- how many rows it changed (reading them back costs CPU on every completion).
-- @param ids: &str
-- @param token: i64
DELETE FROM backlog_job
WHERE id IN (SELECT value FROM json_each(?1)) AND lease_token = ?2 AND state = 'running'
