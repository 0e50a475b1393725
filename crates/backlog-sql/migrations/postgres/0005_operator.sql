-- What happened per queue and minute, summed over every process, and the operators' actions.
--
-- backlog_stat: each process adds its counts (jobs enqueued, started, completed, failed, dead,
-- rescued, and the enqueue-to-start wait as a histogram) for the minute they happened in, every
-- few seconds; the leader adds a snapshot of the queue's depth once a minute. minute is the
-- minute's start in microseconds; the row of minute 0 holds the sums of the minutes pruned, so
-- that the sum over every row of a queue only grows (Prometheus counters). The wait buckets
-- count jobs whose wait was at most 1 ms, then more than that and at most 10 ms, … , and more
-- than 60 s (wait_inf).
--
-- backlog_audit: every operator action (retry, cancel, hold, release, redrive, pause, resume,
-- settings), with who did it and when.
CREATE TABLE backlog_stat (
    queue       TEXT NOT NULL,
    minute      BIGINT NOT NULL,
    enqueued    BIGINT NOT NULL DEFAULT 0,
    started     BIGINT NOT NULL DEFAULT 0,
    completed   BIGINT NOT NULL DEFAULT 0,
    failed      BIGINT NOT NULL DEFAULT 0,
    dead        BIGINT NOT NULL DEFAULT 0,
    rescued     BIGINT NOT NULL DEFAULT 0,
    wait_sum_us BIGINT NOT NULL DEFAULT 0,
    wait_1ms    BIGINT NOT NULL DEFAULT 0,
    wait_10ms   BIGINT NOT NULL DEFAULT 0,
    wait_100ms  BIGINT NOT NULL DEFAULT 0,
    wait_1s     BIGINT NOT NULL DEFAULT 0,
    wait_10s    BIGINT NOT NULL DEFAULT 0,
    wait_60s    BIGINT NOT NULL DEFAULT 0,
    wait_inf    BIGINT NOT NULL DEFAULT 0,
    available   BIGINT NULL,
    scheduled   BIGINT NULL,
    running     BIGINT NULL,
    dead_total  BIGINT NULL,
    PRIMARY KEY (queue, minute)
);

CREATE TABLE backlog_audit (
    id     BIGSERIAL PRIMARY KEY,
    at     BIGINT NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    queue  TEXT NULL,
    job_id BIGINT NULL,
    detail JSONB NOT NULL DEFAULT '{}'
);
