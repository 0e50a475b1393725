-- Per queue, the sums over every row, the folded minute 0 included: counters that only grow.
-- SUM of bigint is numeric in PostgreSQL: cast back.
SELECT queue, 0::bigint AS minute, SUM(enqueued)::bigint AS enqueued, SUM(started)::bigint AS started, SUM(completed)::bigint AS completed, SUM(failed)::bigint AS failed, SUM(dead)::bigint AS dead, SUM(rescued)::bigint AS rescued, SUM(wait_sum_us)::bigint AS wait_sum_us, SUM(wait_1ms)::bigint AS wait_1ms, SUM(wait_10ms)::bigint AS wait_10ms, SUM(wait_100ms)::bigint AS wait_100ms, SUM(wait_1s)::bigint AS wait_1s, SUM(wait_10s)::bigint AS wait_10s, SUM(wait_60s)::bigint AS wait_60s, SUM(wait_inf)::bigint AS wait_inf, NULL::bigint AS available, NULL::bigint AS scheduled, NULL::bigint AS running, NULL::bigint AS dead_total
FROM backlog_stat
GROUP BY queue
ORDER BY queue
