-- @generated from templates/sqlite/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first, then highest id, in two statements
-- sent as one command: the first marks the rows with the claim's fresh token, the second reads
-- them back as one row, a JSON array with, for each job, [id, kind, payload, priority, attempt,
-- max_attempts, run_at, created_at, trace_context, group_key] (the payload and trace context as
-- strings), in no particular order. `kinds`: a JSON array, NULL for any kind. One command and one
-- row, not a row per job: the SQLite driver runs the connection on a thread of its own, and each
-- command is a round trip to it and each row of a result a hand-over back, which cost more than
-- the claim itself (docs/explain.md, "SQLite: a claim read back in one row"). Every claim of the
-- library on SQLite but those under a queue's limits takes this form, in a write transaction. A
-- client whose driver takes one statement at a time runs the two in turn, in one transaction.
-- All rows of one claim share its expiry, so the read-back finds them by the lease index.
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
);
SELECT json_group_array(json_array(
    id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
))
FROM backlog_job
WHERE state = 'running' AND lease_expires_at = ?3 AND lease_token = ?1
