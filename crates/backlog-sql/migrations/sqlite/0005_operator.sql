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
    minute      INTEGER NOT NULL,
    enqueued    INTEGER NOT NULL DEFAULT 0,
    started     INTEGER NOT NULL DEFAULT 0,
    completed   INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    dead        INTEGER NOT NULL DEFAULT 0,
    rescued     INTEGER NOT NULL DEFAULT 0,
    wait_sum_us INTEGER NOT NULL DEFAULT 0,
    wait_1ms    INTEGER NOT NULL DEFAULT 0,
    wait_10ms   INTEGER NOT NULL DEFAULT 0,
    wait_100ms  INTEGER NOT NULL DEFAULT 0,
    wait_1s     INTEGER NOT NULL DEFAULT 0,
    wait_10s    INTEGER NOT NULL DEFAULT 0,
    wait_60s    INTEGER NOT NULL DEFAULT 0,
    wait_inf    INTEGER NOT NULL DEFAULT 0,
    available   INTEGER NULL,
    scheduled   INTEGER NULL,
    running     INTEGER NULL,
    dead_total  INTEGER NULL,
    PRIMARY KEY (queue, minute)
);

CREATE TABLE backlog_audit (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    queue  TEXT NULL,
    job_id INTEGER NULL,
    detail TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail))
);
