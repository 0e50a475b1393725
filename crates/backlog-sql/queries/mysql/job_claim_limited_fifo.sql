-- @generated from templates/mysql/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (FIFO), in the
-- transaction that holds the queue row's lock (queue_lock) and has counted its running jobs
-- (queue_running): `limit` is what the limit leaves. Not the paused check of job_claim_fifo:
-- queue_lock read it under the lock. job_claim_update takes the rows in the same transaction.
-- One shard per statement, as in job_claim_fifo.
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
-- @bind queue, shard, now, kinds, kinds, after_priority, after_priority, after_priority, after_run_at, after_run_at, after_id, limit
SELECT
    id, kind, CAST(payload AS CHAR) AS payload, priority, attempt + 1 AS attempt,
    max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND (? IS NULL OR priority > ? OR (priority = ? AND (run_at > ? OR (run_at = ? AND id > ?))))
ORDER BY priority, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED
