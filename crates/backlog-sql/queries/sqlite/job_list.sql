-- Jobs in id order after `after_id`, of a queue and a state when not NULL. `mode`: 0 any time,
-- 1 due (run_at <= now), 2 not yet due and never failed (attempt 0), 3 not yet due after a
-- failed attempt. `kind`,
-- `unique_key`: only this kind, this unique key, when not NULL.
-- @param queue: Option<&str>
-- @param state: Option<&str>
-- @param after_id: i64
-- @param mode: i32
-- @param now: i64
-- @param limit: i64
-- @param kind: Option<&str>
-- @param unique_key: Option<&str>
SELECT id, queue, kind, state, payload, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key, deps_left
FROM backlog_job
WHERE (?1 IS NULL OR queue = ?1) AND (?2 IS NULL OR state = ?2) AND id > ?3
  AND (?4 = 0 OR (?4 = 1 AND run_at <= ?5) OR (?4 = 2 AND run_at > ?5 AND attempt = 0)
       OR (?4 = 3 AND run_at > ?5 AND attempt > 0))
  AND (?7 IS NULL OR kind = ?7)
  AND (?8 IS NULL OR unique_key = ?8)
ORDER BY id
LIMIT +?6
