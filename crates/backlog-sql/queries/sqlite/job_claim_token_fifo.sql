-- Marks the rows of a claim with its fresh token; job_claimed_json reads them back. Every claim
-- of this library on SQLite (claim-token strategy of seeds S3, S5 or not) takes this form.
-- Claims up to `limit` due jobs of a queue, FIFO: by priority, then due time, then id. `kinds`: a
-- JSON array, NULL for any kind.
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
    ORDER BY priority, run_at, id
    LIMIT +?7
)
AND state = 'available'
