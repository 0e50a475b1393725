-- @name job_complete_claim_{order}
-- @axis order: fifo, lifo
-- @set mode=plain
-- A worker's finished jobs of one claim (sharing its lease token) completed and deleted, and the
-- @if order=fifo
-- next claimed under one new lease, FIFO: by priority, then due time, then id.
-- @else
-- next claimed under one new lease, LIFO: by priority, then latest due time first, then highest id.
-- @end
-- job_claim_json_{{order}} with the completion's delete between its two statements, one command (the
-- SQLite driver's round trips to its connection's thread cost more than the statements;
-- docs/explain.md, "SQLite: a claim read back in one row"). One row comes back: how many the
-- delete deleted, and the claimed jobs as job_claim_json_{{order}}'s array. For retention `delete`,
-- the most common completion of a busy queue; the others complete with their own statement before
-- the claim. Run in the caller's transaction, which is undone when the count falls short of the
-- jobs sent (a lease was lost), and the completion is then done again statement by statement,
-- reading back which were completed. `done_ids`: the finished jobs' ids as a JSON array,
-- `done_token`: their lease token.
-- @include claim_params
-- @param done_ids: &str
-- @param done_token: i64
-- @include claim_update
);
DELETE FROM backlog_job
WHERE id IN (SELECT value FROM json_each(${done_ids})) AND lease_token = ${done_token} AND state = 'running';
SELECT changes(),
       (SELECT json_group_array(json_array(
            -- @include claim_columns
        ))
        FROM backlog_job
        WHERE state = 'running' AND lease_expires_at = ${expires} AND lease_token = ${token})
