-- Completes running jobs whose lease tokens still match: deletes them, returning their ids.
-- (id, lease_token) pairs come as two parallel arrays: one statement for any batch size. The
-- primary-key scan of `id = ANY` visits (and so locks) the rows in id order, as every multi-row
-- writer here does, so concurrent completions and claim-token claimers do not deadlock (should a
-- plan ever visit them otherwise, the database reports a deadlock and the completion is retried).
-- Ids are distinct within a call; array_position finds each row's own token.
-- @param ids: &[i64]
-- @param tokens: &[i64]
DELETE FROM backlog_job
WHERE id = ANY($1::bigint[]) AND state = 'running'
  AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
RETURNING id
