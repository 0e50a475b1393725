-- The minutes from a time on (never the row of minute 0), of one queue or all, oldest first.
-- @param since: i64
-- @param queue: Option<&str>
SELECT queue, minute, enqueued, started, completed, failed, dead, rescued, wait_sum_us, wait_1ms, wait_10ms, wait_100ms, wait_1s, wait_10s, wait_60s, wait_inf, available, scheduled, running, dead_total
FROM backlog_stat
WHERE minute >= ?1 AND (?2 IS NULL OR queue = ?2)
ORDER BY minute, queue
