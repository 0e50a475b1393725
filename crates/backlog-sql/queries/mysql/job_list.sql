-- mode: 0 any time, 1 due (run_at <= now), 2 not yet due, 3 not yet due after a failed attempt.
-- queue, state, kind and unique_key: NULL for any.
-- @param queue: Option<&str>
-- @param state: Option<&str>
-- @param after_id: i64
-- @param mode: i32
-- @param now: i64
-- @param limit: i64
-- @param kind: Option<&str>
-- @param unique_key: Option<&str>
-- @bind queue, queue, state, state, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit
SELECT id, queue, kind, state, CAST(payload AS CHAR) AS payload, priority, run_at, attempt,
       max_attempts, lease_token, lease_owner, lease_expires_at, unique_key,
       CAST(errors AS CHAR) AS errors, CAST(result AS CHAR) AS result,
       CAST(progress AS CHAR) AS progress, created_at, attempted_at, finished_at,
       cancel_requested_at, trace_context, group_key
FROM backlog_job
WHERE (? IS NULL OR queue = ?) AND (? IS NULL OR state = ?) AND id > ?
  AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ?)
       OR (? = 3 AND run_at > ? AND attempt > 0))
  AND (? IS NULL OR kind = ?)
  AND (? IS NULL OR unique_key = ?)
ORDER BY id
LIMIT ?
