WHERE queue = ${queue} AND state = 'available' AND shard = ${shard} AND run_at <= ${now}
  AND (${kinds} IS NULL OR JSON_CONTAINS(${kinds}, JSON_QUOTE(kind)))
-- @if order=fifo mode!=token
  AND (${after_priority} IS NULL OR priority > ${after_priority} OR (priority = ${after_priority} AND (run_at > ${after_run_at} OR (run_at = ${after_run_at} AND id > ${after_id}))))
-- @end
-- @if mode!=limited mode!=limited_twostep
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ${queue} AND (paused OR global_concurrency IS NOT NULL
                                                                  OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
-- @end
-- @if order=fifo
ORDER BY priority, run_at, id
-- @else
ORDER BY priority, run_at DESC, id DESC
-- @end
