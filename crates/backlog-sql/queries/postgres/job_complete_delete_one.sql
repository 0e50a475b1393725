-- Completes running jobs of one claim (one lease token): deletes them, returning their ids.
-- The ids are checked with one token instead of a token per id: the form for a worker that
-- completes a claim's jobs together. See job_complete_delete for the lock order.
-- @param ids: &[i64]
-- @param token: i64
DELETE FROM backlog_job
WHERE id = ANY($1::bigint[]) AND state = 'running'
  AND lease_token = $2::bigint
RETURNING id
