-- backlog schema version 1 (MySQL 8 / MariaDB 10.6+, their common subset).
-- Times are microseconds since the Unix epoch, UTC (UNIX_TIMESTAMP ignores the session time zone).
-- utf8mb4_bin: names compare byte for byte, as on PostgreSQL and SQLite.
CREATE TABLE backlog_queue (
    name            VARCHAR(128) NOT NULL PRIMARY KEY,
    paused          BOOLEAN NOT NULL DEFAULT FALSE,
    max_attempts    INT NOT NULL DEFAULT 25,
    backoff_base_ms BIGINT NOT NULL DEFAULT 1000,
    backoff_max_ms  BIGINT NOT NULL DEFAULT 3600000,
    lease_ms        BIGINT NOT NULL DEFAULT 30000,
    ordering        VARCHAR(8) NOT NULL DEFAULT 'fifo',
    retention       VARCHAR(8) NOT NULL DEFAULT 'keep',
    concurrency     INT NULL,
    created_at      BIGINT NOT NULL DEFAULT (CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)),
    updated_at      BIGINT NOT NULL DEFAULT (CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)),
    CONSTRAINT backlog_queue_name CHECK (name <> ''),
    CONSTRAINT backlog_queue_max_attempts CHECK (max_attempts >= 1),
    CONSTRAINT backlog_queue_backoff CHECK (backoff_base_ms >= 0 AND backoff_max_ms >= 0),
    CONSTRAINT backlog_queue_lease CHECK (lease_ms >= 1),
    CONSTRAINT backlog_queue_ordering CHECK (ordering IN ('fifo', 'lifo')),
    CONSTRAINT backlog_queue_retention CHECK (retention IN ('delete', 'keep', 'archive')),
    CONSTRAINT backlog_queue_concurrency CHECK (concurrency >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE backlog_job (
    id               BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue            VARCHAR(128) NOT NULL,
    kind             VARCHAR(128) NULL,
    payload          JSON NOT NULL DEFAULT ('{}'),
    state            VARCHAR(16) NOT NULL DEFAULT 'available',
    priority         SMALLINT NOT NULL DEFAULT 0,
    run_at           BIGINT NOT NULL DEFAULT (CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)),
    attempt          INT NOT NULL DEFAULT 0,
    max_attempts     INT NULL,
    lease_token      BIGINT NULL,
    lease_owner      VARCHAR(255) NULL,
    lease_expires_at BIGINT NULL,
    unique_key       VARCHAR(255) NULL,
    -- No partial indexes here: the unique key is indexed through a generated column that is
    -- NULL (and so never conflicts) once the job is finished.
    unique_active    VARCHAR(255) GENERATED ALWAYS AS
                     (CASE WHEN state IN ('available', 'running', 'held') THEN unique_key END) STORED,
    errors           JSON NOT NULL DEFAULT ('[]'),
    result           JSON NULL,
    progress         JSON NULL,
    created_at       BIGINT NOT NULL DEFAULT (CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)),
    attempted_at     BIGINT NULL,
    finished_at      BIGINT NULL,
    CONSTRAINT backlog_job_state
        CHECK (state IN ('available', 'running', 'completed', 'dead', 'cancelled', 'held')),
    CONSTRAINT backlog_job_queue CHECK (queue <> ''),
    CONSTRAINT backlog_job_max_attempts CHECK (max_attempts >= 1),
    -- The claim query's index (state leads the order: no partial indexes in MySQL).
    KEY backlog_job_claim (queue, state, priority, run_at, id),
    KEY backlog_job_lease (state, lease_expires_at),
    UNIQUE KEY backlog_job_unique (queue, unique_active)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE backlog_job_archive (
    id               BIGINT NOT NULL PRIMARY KEY,
    queue            VARCHAR(128) NOT NULL,
    kind             VARCHAR(128) NULL,
    payload          JSON NOT NULL,
    state            VARCHAR(16) NOT NULL,
    priority         SMALLINT NOT NULL,
    run_at           BIGINT NOT NULL,
    attempt          INT NOT NULL,
    max_attempts     INT NULL,
    lease_token      BIGINT NULL,
    lease_owner      VARCHAR(255) NULL,
    lease_expires_at BIGINT NULL,
    unique_key       VARCHAR(255) NULL,
    errors           JSON NOT NULL,
    result           JSON NULL,
    progress         JSON NULL,
    created_at       BIGINT NOT NULL,
    attempted_at     BIGINT NULL,
    finished_at      BIGINT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
