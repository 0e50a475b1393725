-- A queue's stored settings.
-- @param name: &str
SELECT name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering,
       retention, concurrency
FROM backlog_queue WHERE name = ?1
