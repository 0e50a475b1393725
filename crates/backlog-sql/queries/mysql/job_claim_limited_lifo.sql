-- @generated from templates/mysql/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (LIFO), in the
-- transaction that holds the queue row's lock (queue_lock) and has counted its running jobs
-- (queue_running): `limit` is what the limit leaves. Not the paused check of job_claim_lifo:
-- queue_lock read it under the lock. job_claim_update takes the rows in the same transaction.
-- One shard per statement, as in job_claim_fifo.
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @bind queue, shard, now, kinds, kinds, limit
SELECT
    id, kind, CAST(payload AS CHAR) AS payload, priority, attempt + 1 AS attempt,
    max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
ORDER BY priority, run_at DESC, id DESC
LIMIT ?
FOR UPDATE SKIP LOCKED
