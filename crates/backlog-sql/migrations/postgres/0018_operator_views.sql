-- backlog schema version 18: what operators see of the runtime.
--
-- The workers, each registered while it runs (the dashboard's and `backlog workers`' view). A
-- worker upserts its row every 5 s with what it runs, and deletes it when it stops; a row whose
-- expires_at has passed is a worker that stopped without saying so (killed, cut off). Rows
-- expired an hour are deleted by a worker's beat.
CREATE TABLE backlog_worker (
    id         TEXT PRIMARY KEY CHECK (id <> ''),
    host       TEXT NOT NULL,
    pid        BIGINT NOT NULL,
    version    TEXT NOT NULL,
    -- The queues and each one's concurrency, as a JSON array of {"queue": …, "concurrency": …}.
    queues     JSONB NOT NULL,
    -- Jobs running past their handler's first poll, at the last beat.
    running    BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    seen_at    BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- The periodic schedules as their leader declares them (every minute while it leads): what each
-- is, the queue and kind of its jobs, and its next tick, beside the last tick fired. NULL for a
-- schedule no leader of version 18 has declared yet.
ALTER TABLE backlog_cron ADD COLUMN schedule TEXT, ADD COLUMN queue TEXT, ADD COLUMN kind TEXT,
    ADD COLUMN next_tick BIGINT, ADD COLUMN declared_at BIGINT;
