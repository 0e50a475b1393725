-- Per queue, the sums over every row, the folded minute 0 included: counters that only grow.
SELECT queue, 0 AS minute, SUM(enqueued) AS enqueued, SUM(started) AS started, SUM(completed) AS completed, SUM(failed) AS failed, SUM(dead) AS dead, SUM(rescued) AS rescued, SUM(wait_sum_us) AS wait_sum_us, SUM(wait_1ms) AS wait_1ms, SUM(wait_10ms) AS wait_10ms, SUM(wait_100ms) AS wait_100ms, SUM(wait_1s) AS wait_1s, SUM(wait_10s) AS wait_10s, SUM(wait_60s) AS wait_60s, SUM(wait_inf) AS wait_inf, NULL AS available, NULL AS scheduled, NULL AS running, NULL AS dead_total
FROM backlog_stat
GROUP BY queue
ORDER BY queue
