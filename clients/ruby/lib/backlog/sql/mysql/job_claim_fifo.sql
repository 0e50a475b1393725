-- @generated from templates/mysql/job_claim.sql by tests/templates.rs: edit the template
-- SKIP LOCKED: concurrent claimers pass over each other's rows; job_claim_update takes these in
-- the same transaction (no UPDATE … RETURNING in MySQL), so the SELECT returns what it will write.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: the claim index whatever the statistics say (a
-- scan would lock far more rows). Not the queue, token or lease expiry: the claimer chose them.
-- By priority, then the oldest due first (FIFO).
-- After: the shard's claim cursor (src/cursor.rs), the key `(priority, run_at, id)` past
-- which it starts, past the delete-marked entries a held snapshot keeps purge from
-- removing; NULL: from the head (a full pass). Written out with OR, which the range
-- optimizer reads as ranges of the claim index.
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @param after_priority: Option<i16>
-- @param after_run_at: Option<i64>
-- @param after_id: Option<i64>
-- @bind queue, shard, now, kinds, kinds, after_priority, after_priority, after_priority, after_run_at, after_run_at, after_id, queue, limit
SELECT
    id, kind, CAST(payload AS CHAR) AS payload, priority, attempt + 1 AS attempt,
    max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND (? IS NULL OR priority > ? OR (priority = ? AND (run_at > ? OR (run_at = ? AND id > ?))))
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR global_concurrency IS NOT NULL
                                                                  OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
ORDER BY priority, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED
