-- @generated from templates/sqlite/job_complete_claim.sql by tests/templates.rs: edit the template
-- A worker's finished jobs of one claim (sharing its lease token) completed and deleted, and the
-- next claimed under one new lease, FIFO: by priority, then due time, then id.
-- job_claim_json_fifo with the completion's delete between its two statements, one command (the
-- SQLite driver's round trips to its connection's thread cost more than the statements;
-- docs/explain.md, "SQLite: a claim read back in one row"). One row comes back: how many the
-- delete deleted, and the claimed jobs as job_claim_json_fifo's array. For retention `delete`,
-- the most common completion of a busy queue; the others complete with their own statement before
-- the claim. Run in the caller's transaction, which is undone when the count falls short of the
-- jobs sent (a lease was lost), and the completion is then done again statement by statement,
-- reading back which were completed. `done_ids`: the finished jobs' ids as a JSON array,
-- `done_token`: their lease token.
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
-- @param done_ids: &str
-- @param done_token: i64
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ?1, lease_owner = ?2,
    lease_expires_at = ?3, attempted_at = ?4
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE queue = ?5 AND state = 'available' AND run_at <= ?4
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ?5 AND (paused = 1 OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at, id
    LIMIT +?7
);
DELETE FROM backlog_job
WHERE id IN (SELECT value FROM json_each(?8)) AND lease_token = ?9 AND state = 'running';
SELECT changes(),
       (SELECT json_group_array(json_array(
            id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
        ))
        FROM backlog_job
        WHERE state = 'running' AND lease_expires_at = ?3 AND lease_token = ?1)
