-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- job_complete_keep without reading back the ids: for a completion that checks only
-- how many rows it changed (reading them back costs CPU on every completion).
-- @param pairs: &str
-- @param now: i64
UPDATE backlog_job
SET state = 'completed', finished_at = ?2, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
