-- @generated from templates/mysql/job_claim.sql by tests/templates.rs: edit the template
-- Claim-token strategy (seeds S3, S5): UPDATE … ORDER BY … LIMIT marks rows with a fresh token
-- (MySQL allows ORDER BY and LIMIT on a single-table UPDATE); job_select_token reads them back.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: every claimer locks rows in claim-index order, so
-- they queue instead of deadlocking.
-- By priority, then the newest due first (LIFO).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param shard: i32
-- @param kinds: Option<&str>
-- @param limit: i64
-- @bind token, owner, expires, now, queue, shard, now, kinds, kinds, queue, limit
UPDATE backlog_job FORCE INDEX (backlog_job_shard_claim)
SET state = 'running', attempt = attempt + 1, lease_token = ?, lease_owner = ?,
    lease_expires_at = ?, attempted_at = ?
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR global_concurrency IS NOT NULL
                                                                  OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
ORDER BY priority, run_at DESC, id DESC
LIMIT ?
