UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ${token}, lease_owner = ${owner},
    lease_expires_at = ${expires}, attempted_at = ${now}
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE queue = ${queue} AND state = 'available' AND run_at <= ${now}
      AND (${kinds} IS NULL OR kind IN (SELECT value FROM json_each(${kinds})))
-- @if mode!=limited
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ${queue} AND (paused = 1 OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
-- @end
-- @if order=fifo
    ORDER BY priority, run_at, id
-- @else
    ORDER BY priority, run_at DESC, id DESC
-- @end
    LIMIT +${limit}
