-- VALUES(col) rather than MySQL 8's row alias, which MariaDB does not have.
-- @param name: &str
-- @param paused: bool
-- @param max_attempts: i32
-- @param backoff_base_ms: i64
-- @param backoff_max_ms: i64
-- @param lease_ms: i64
-- @param ordering: &str
-- @param retention: &str
-- @param concurrency: Option<i32>
-- @param global_concurrency: Option<i32>
-- @param group_concurrency: i32
-- @param group_on_failure: &str
-- @param rate_limit: Option<i32>
-- @param rate_period_ms: i64
-- @param group_rate_limit: Option<i32>
-- @param group_rate_period_ms: i64
-- @param shards: i32
-- @param now: i64
-- @bind name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering, retention, concurrency, global_concurrency, group_concurrency, group_on_failure, rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, shards, now, now
INSERT INTO backlog_queue (name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms,
                           ordering, retention, concurrency, global_concurrency,
                           group_concurrency, group_on_failure, rate_limit, rate_period_ms,
                           group_rate_limit, group_rate_period_ms, shards, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    paused = VALUES(paused), max_attempts = VALUES(max_attempts),
    backoff_base_ms = VALUES(backoff_base_ms), backoff_max_ms = VALUES(backoff_max_ms),
    lease_ms = VALUES(lease_ms), ordering = VALUES(ordering), retention = VALUES(retention),
    concurrency = VALUES(concurrency), global_concurrency = VALUES(global_concurrency),
    group_concurrency = VALUES(group_concurrency), group_on_failure = VALUES(group_on_failure),
    rate_limit = VALUES(rate_limit), rate_period_ms = VALUES(rate_period_ms),
    group_rate_limit = VALUES(group_rate_limit),
    group_rate_period_ms = VALUES(group_rate_period_ms), shards = VALUES(shards),
    updated_at = VALUES(updated_at)
