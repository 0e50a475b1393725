-- @generated from templates/sqlite/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (FIFO), in the
-- transaction that holds the queue row's lock (queue_lock) and has counted its running jobs
-- (queue_running): `limit` is what the limit leaves. Not the paused check of job_claim_fifo:
-- queue_lock read it under the lock.
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
    ORDER BY priority, run_at, id
    LIMIT +?7
)
RETURNING
    id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
