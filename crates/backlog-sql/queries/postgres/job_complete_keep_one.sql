-- Completes running jobs of one claim (one lease token): marks them completed, kept, returning
-- their ids. The ids are checked with one token instead of a token per id: the form for a worker
-- that completes a claim's jobs together. See job_complete_keep for the lock order.
-- @param ids: &[i64]
-- @param token: i64
-- @param now: i64
UPDATE backlog_job
SET state = 'completed', finished_at = $3, lease_token = NULL, lease_expires_at = NULL
WHERE id = ANY($1::bigint[]) AND state = 'running'
  AND lease_token = $2::bigint
RETURNING id
