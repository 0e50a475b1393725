-- backlog schema version 2 (MySQL 8 / MariaDB 10.6+): the worker runtime's tables.
-- DDL commits statement by statement here, so each statement stands alone.
-- Cancellation of a running job is requested here and seen by its worker at the next heartbeat.
ALTER TABLE backlog_job ADD COLUMN cancel_requested_at BIGINT NULL;
ALTER TABLE backlog_job_archive ADD COLUMN cancel_requested_at BIGINT NULL;

-- Leader election without vendor locks (GET_LOCK dies with its session): a lease row per name,
-- with expiry and a term.
CREATE TABLE backlog_leader (
    name       VARCHAR(128) NOT NULL PRIMARY KEY,
    holder     VARCHAR(255) NOT NULL,
    term       BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The last tick fired per periodic schedule, so that each tick fires exactly once.
CREATE TABLE backlog_cron (
    name      VARCHAR(255) NOT NULL PRIMARY KEY,
    last_tick BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Fan-out: every queue subscribed to a topic gets its own copy of what is published to it.
CREATE TABLE backlog_subscription (
    topic      VARCHAR(128) NOT NULL,
    queue      VARCHAR(128) NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (topic, queue),
    CONSTRAINT backlog_subscription_topic CHECK (topic <> ''),
    CONSTRAINT backlog_subscription_queue CHECK (queue <> '')
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
