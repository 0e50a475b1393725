-- A worker's finished jobs completed (deleted, where their lease tokens still match) and the next
-- claimed under one new lease, LIFO: by priority, then latest due time first, then highest id, in
-- one command of three statements: the claim marks its rows (job_claim_token_lifo), the completion
-- deletes (job_complete_delete_unread), and one row comes back with how many the completion deleted
-- and the claimed jobs as job_claimed_json's array. One command, not three: the SQLite driver runs
-- the connection on a thread of its own, and each command is a round trip to it, both threads put
-- to sleep and woken (docs/explain.md, "SQLite: a claim read back in one row"). Run in the caller's
-- transaction, which is undone when the count falls short of the jobs sent (a lease was lost) and
-- the completion is then done again statement by statement, reading back which were completed.
-- `kinds`: a JSON array, NULL for any kind. `pairs`: the (id, lease_token) pairs as a JSON array of
-- two-element arrays.
-- @param claim_token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
-- @param pairs: &str
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ?1, lease_owner = ?2,
    lease_expires_at = ?3, attempted_at = ?4
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE queue = ?5 AND state = 'available' AND run_at <= ?4
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ?5 AND (paused = 1 OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at DESC, id DESC
    LIMIT +?7
)
AND state = 'available';
DELETE FROM backlog_job
WHERE id IN (
    SELECT b.id FROM json_each(?8) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
);
SELECT changes(),
       (SELECT json_group_array(json_array(id, kind, payload, priority, attempt, max_attempts,
                                           run_at, created_at, trace_context, group_key))
        FROM backlog_job
        WHERE state = 'running' AND lease_expires_at = ?3 AND lease_token = ?1)
