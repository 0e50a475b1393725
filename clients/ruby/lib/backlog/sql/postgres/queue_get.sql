-- @param name: &str
SELECT name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering,
       retention, concurrency, global_concurrency, group_concurrency, group_on_failure,
       rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, shards
FROM backlog_queue WHERE name = $1
