-- (id, lease_token) pairs come as two parallel arrays: one statement for any batch size, driven
-- from the pairs to the primary key. Rows are locked in id order first so concurrent multi-row
-- writers (other completions, claim-token claimers re-checking rows) cannot deadlock.
WITH target AS (
    SELECT j.id FROM UNNEST($1::bigint[], $2::bigint[]) AS t(id, token)
    JOIN backlog_job j ON j.id = t.id AND j.lease_token = t.token
    WHERE j.state = 'running'
    ORDER BY j.id
    FOR UPDATE OF j
)
DELETE FROM backlog_job j USING target WHERE j.id = target.id
RETURNING j.id
