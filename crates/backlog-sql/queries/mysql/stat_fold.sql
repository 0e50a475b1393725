-- Folds the minutes before a time into each queue's row of minute 0 (stat_prune then deletes
-- them, in the same transaction).
-- @param before: i64
INSERT INTO backlog_stat (queue, minute, enqueued, started, completed, failed, dead, rescued, wait_sum_us, wait_1ms, wait_10ms, wait_100ms, wait_1s, wait_10s, wait_60s, wait_inf)
SELECT queue, 0, SUM(enqueued), SUM(started), SUM(completed), SUM(failed), SUM(dead), SUM(rescued), SUM(wait_sum_us), SUM(wait_1ms), SUM(wait_10ms), SUM(wait_100ms), SUM(wait_1s), SUM(wait_10s), SUM(wait_60s), SUM(wait_inf)
FROM backlog_stat
WHERE minute > 0 AND minute < ?
GROUP BY queue
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
