-- backlog schema version 18 (MySQL 8 / MariaDB 10.6+): the workers, each registered while it
-- runs (the dashboard's and `backlog workers`' view). A worker upserts its row every few seconds
-- with what it runs, and deletes it when it stops; a row whose expires_at has passed is a worker
-- that stopped without saying so (killed, cut off). Rows expired an hour are deleted by the next
-- worker's beat.
CREATE TABLE backlog_worker (
    id         VARCHAR(255) NOT NULL PRIMARY KEY,
    host       VARCHAR(255) NOT NULL,
    pid        BIGINT NOT NULL,
    version    VARCHAR(64) NOT NULL,
    -- The queues and each one's concurrency, as a JSON array of {"queue": …, "concurrency": …}.
    queues     JSON NOT NULL,
    -- Jobs running past their handler's first poll, at the last beat.
    running    BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    seen_at    BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
