-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- job_complete_delete without reading back the ids: for a completion that checks only
-- how many rows it changed (reading them back costs CPU on every completion).
-- @param pairs: &str
DELETE FROM backlog_job
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
