-- Folds the minutes before a time into each queue's row of minute 0 (stat_prune then deletes
-- them, in the same transaction).
-- @param before: i64
INSERT INTO backlog_stat (queue, minute, enqueued, started, completed, failed, dead, rescued, wait_sum_us, wait_1ms, wait_10ms, wait_100ms, wait_1s, wait_10s, wait_60s, wait_inf)
SELECT queue, 0, SUM(enqueued), SUM(started), SUM(completed), SUM(failed), SUM(dead), SUM(rescued), SUM(wait_sum_us), SUM(wait_1ms), SUM(wait_10ms), SUM(wait_100ms), SUM(wait_1s), SUM(wait_10s), SUM(wait_60s), SUM(wait_inf)
FROM backlog_stat
WHERE minute > 0 AND minute < $1
GROUP BY queue
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
