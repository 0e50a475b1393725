-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Completes running jobs whose lease tokens still match: marks them completed, kept, returning
-- their ids. `pairs`: the (id, lease_token) pairs as JSON (see job_complete_delete).
-- @param pairs: &str
-- @param now: i64
UPDATE backlog_job
SET state = 'completed', finished_at = ?2, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
RETURNING id
