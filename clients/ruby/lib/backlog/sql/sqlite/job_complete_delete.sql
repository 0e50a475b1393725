-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Completes running jobs whose lease tokens still match: deletes them, returning their ids.
-- `pairs`: the (id, lease_token) pairs as a JSON array of two-element arrays. One statement text
-- for any batch size; each pair is looked up by primary key (never a scan of the running jobs).
-- @param pairs: &str
DELETE FROM backlog_job
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
RETURNING id
