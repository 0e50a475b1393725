-- @generated from templates/mysql/job_claim.sql by tests/templates.rs: edit the template
-- SKIP LOCKED: concurrent claimers pass over each other's rows; job_claim_update takes these in
-- the same transaction (no UPDATE … RETURNING in MySQL), so the SELECT returns what it will write.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: the claim index whatever the statistics say (a
-- scan would lock far more rows). Not the queue, token or lease expiry: the claimer chose them.
-- By priority, then the newest due first (LIFO).
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @bind queue, shard, now, kinds, kinds, queue, limit
SELECT
    id, kind, CAST(payload AS CHAR) AS payload, priority, attempt + 1 AS attempt,
    max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR global_concurrency IS NOT NULL
                                                                  OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
ORDER BY priority, run_at DESC, id DESC
LIMIT ?
FOR UPDATE SKIP LOCKED
