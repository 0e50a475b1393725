-- A queue's settings, created or replaced.
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
INSERT INTO backlog_queue (name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms,
                           ordering, retention, concurrency, global_concurrency,
                           group_concurrency, group_on_failure, rate_limit, rate_period_ms,
                           group_rate_limit, group_rate_period_ms, shards, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?18)
ON CONFLICT (name) DO UPDATE SET
    paused = excluded.paused, max_attempts = excluded.max_attempts,
    backoff_base_ms = excluded.backoff_base_ms, backoff_max_ms = excluded.backoff_max_ms,
    lease_ms = excluded.lease_ms, ordering = excluded.ordering, retention = excluded.retention,
    concurrency = excluded.concurrency, global_concurrency = excluded.global_concurrency,
    group_concurrency = excluded.group_concurrency, group_on_failure = excluded.group_on_failure,
    rate_limit = excluded.rate_limit, rate_period_ms = excluded.rate_period_ms,
    group_rate_limit = excluded.group_rate_limit,
    group_rate_period_ms = excluded.group_rate_period_ms, shards = excluded.shards,
    updated_at = excluded.updated_at
