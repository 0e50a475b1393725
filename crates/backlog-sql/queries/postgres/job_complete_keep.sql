-- Completes running jobs whose lease tokens still match: marks them completed, kept, returning
-- their ids. (id, lease_token) pairs come as two parallel arrays (see job_complete_delete for the
-- lock order).
-- @param ids: &[i64]
-- @param tokens: &[i64]
-- @param now: i64
UPDATE backlog_job
SET state = 'completed', finished_at = $3, lease_token = NULL, lease_expires_at = NULL
WHERE id = ANY($1::bigint[]) AND state = 'running'
  AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
RETURNING id
