-- Per queue, the sums over every row, the folded minute 0 included: counters that only grow.
-- SUM is DECIMAL in MySQL: cast back.
SELECT queue, CAST(0 AS SIGNED) AS minute, CAST(SUM(enqueued) AS SIGNED) AS enqueued, CAST(SUM(started) AS SIGNED) AS started, CAST(SUM(completed) AS SIGNED) AS completed, CAST(SUM(failed) AS SIGNED) AS failed, CAST(SUM(dead) AS SIGNED) AS dead, CAST(SUM(rescued) AS SIGNED) AS rescued, CAST(SUM(wait_sum_us) AS SIGNED) AS wait_sum_us, CAST(SUM(wait_1ms) AS SIGNED) AS wait_1ms, CAST(SUM(wait_10ms) AS SIGNED) AS wait_10ms, CAST(SUM(wait_100ms) AS SIGNED) AS wait_100ms, CAST(SUM(wait_1s) AS SIGNED) AS wait_1s, CAST(SUM(wait_10s) AS SIGNED) AS wait_10s, CAST(SUM(wait_60s) AS SIGNED) AS wait_60s, CAST(SUM(wait_inf) AS SIGNED) AS wait_inf, CAST(NULL AS SIGNED) AS available, CAST(NULL AS SIGNED) AS scheduled, CAST(NULL AS SIGNED) AS running, CAST(NULL AS SIGNED) AS dead_total
FROM backlog_stat
GROUP BY queue
ORDER BY queue
