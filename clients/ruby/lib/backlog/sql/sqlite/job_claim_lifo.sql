-- @generated from templates/sqlite/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first, then highest id.
-- `kinds`: a JSON array, NULL for any kind. One statement: SQLite has a single writer, so
-- the picked rows cannot be taken by anyone else.
-- The claim of the SQL contract, for clients in other languages (clients/python): their driver
-- reads a result's rows where it runs. This library marks the rows and reads them back as one
-- row (job_claim_json_lifo), the same jobs.
-- @external
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
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
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING
    id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
