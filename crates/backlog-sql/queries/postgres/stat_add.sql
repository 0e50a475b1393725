-- A process's counts for one queue and minute, added to what other processes added.
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
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
ON CONFLICT (queue, minute) DO UPDATE SET
    enqueued = backlog_stat.enqueued + excluded.enqueued,
    started = backlog_stat.started + excluded.started,
    completed = backlog_stat.completed + excluded.completed,
    failed = backlog_stat.failed + excluded.failed,
    dead = backlog_stat.dead + excluded.dead,
    rescued = backlog_stat.rescued + excluded.rescued,
    wait_sum_us = backlog_stat.wait_sum_us + excluded.wait_sum_us,
    wait_1ms = backlog_stat.wait_1ms + excluded.wait_1ms,
    wait_10ms = backlog_stat.wait_10ms + excluded.wait_10ms,
    wait_100ms = backlog_stat.wait_100ms + excluded.wait_100ms,
    wait_1s = backlog_stat.wait_1s + excluded.wait_1s,
    wait_10s = backlog_stat.wait_10s + excluded.wait_10s,
    wait_60s = backlog_stat.wait_60s + excluded.wait_60s,
    wait_inf = backlog_stat.wait_inf + excluded.wait_inf
