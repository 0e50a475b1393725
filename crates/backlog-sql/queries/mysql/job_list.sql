-- mode (bound three times): 0 any time, 1 due (run_at <= now), 2 not yet due, 3 not yet due
-- after a failed attempt. Then the kind and the unique key (each twice; NULL for any). MySQL placeholders are positional, so repeated values are bound again.
SELECT id, queue, kind, state, CAST(payload AS CHAR) AS payload, priority, run_at, attempt,
       max_attempts, lease_token, lease_owner, lease_expires_at, unique_key,
       CAST(errors AS CHAR) AS errors, CAST(result AS CHAR) AS result,
       CAST(progress AS CHAR) AS progress, created_at, attempted_at, finished_at,
       cancel_requested_at, trace_context
FROM backlog_job
WHERE (? IS NULL OR queue = ?) AND (? IS NULL OR state = ?) AND id > ?
  AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ?)
       OR (? = 3 AND run_at > ? AND attempt > 0))
  AND (? IS NULL OR kind = ?)
  AND (? IS NULL OR unique_key = ?)
ORDER BY id
LIMIT ?
