-- A process's counts for one queue and minute, added to what other processes added.
-- VALUES(col) is the row this statement tried to insert (MySQL 8 and MariaDB alike).
-- @param queue: &str
-- @param minute: i64
-- @param enqueued: i64
-- @param started: i64
-- @param completed: i64
-- @param failed: i64
-- @param dead: i64
-- @param rescued: i64
-- @param wait_sum_us: i64
-- @param wait_1ms: i64
-- @param wait_10ms: i64
-- @param wait_100ms: i64
-- @param wait_1s: i64
-- @param wait_10s: i64
-- @param wait_60s: i64
-- @param wait_inf: i64
INSERT INTO backlog_stat (queue, minute, enqueued, started, completed, failed, dead, rescued, wait_sum_us, wait_1ms, wait_10ms, wait_100ms, wait_1s, wait_10s, wait_60s, wait_inf)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    enqueued = enqueued + VALUES(enqueued),
    started = started + VALUES(started),
    completed = completed + VALUES(completed),
    failed = failed + VALUES(failed),
    dead = dead + VALUES(dead),
    rescued = rescued + VALUES(rescued),
    wait_sum_us = wait_sum_us + VALUES(wait_sum_us),
    wait_1ms = wait_1ms + VALUES(wait_1ms),
    wait_10ms = wait_10ms + VALUES(wait_10ms),
    wait_100ms = wait_100ms + VALUES(wait_100ms),
    wait_1s = wait_1s + VALUES(wait_1s),
    wait_10s = wait_10s + VALUES(wait_10s),
    wait_60s = wait_60s + VALUES(wait_60s),
    wait_inf = wait_inf + VALUES(wait_inf)
