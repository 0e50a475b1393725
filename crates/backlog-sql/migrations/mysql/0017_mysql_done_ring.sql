-- backlog schema version 17 (MySQL/MariaDB): completed jobs kept under retention `keep` move
-- out of the job table into a ring of 16 plain tables that the leader empties whole.
--
-- A completed job kept in backlog_job stayed a row that claims walk past and that the prune
-- deletes row by row; while another session holds a consistent snapshot, InnoDB's purge cannot
-- remove those delete-marked rows, and the job table grew by every job completed (27 MiB a
-- minute at 1,000 jobs/s). Now a completion under `keep` moves its job into the table the view
-- backlog_job_done_current names, one of backlog_job_done_0 … backlog_job_done_15, in the
-- transaction that completes it; the leader turns the view to the next table once a period has
-- passed (and that table is empty), and empties with TRUNCATE TABLE … NOWAIT each other table
-- whose every row finished longer ago than completed jobs are kept. Plain tables, not
-- partitions: TRUNCATE PARTITION needs the metadata lock of the whole table, which every open
-- transaction that touched it holds (docs/bench-journal/2026-11-28-held-snapshot-bare-sql.md).
-- Writers name only the view, so no writer can put a row into a table being emptied.
--
-- Completed jobs of version 16 stay in backlog_job (the prune deletes them as before); a
-- plain-SQL consumer that completes in place still works the same way.
CREATE TABLE backlog_job_done_ring (
    one        TINYINT NOT NULL PRIMARY KEY DEFAULT 1,
    -- How long the leader writes one table before it turns to the next.
    period_us  BIGINT NOT NULL DEFAULT 7200000000,
    -- When the view last turned.
    turned_at  BIGINT NOT NULL DEFAULT (CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)),
    CONSTRAINT backlog_job_done_ring_one CHECK (one = 1),
    CONSTRAINT backlog_job_done_ring_period CHECK (period_us > 0)
) ENGINE = InnoDB;
INSERT INTO backlog_job_done_ring (one) VALUES (1);

-- The columns of backlog_job but the generated unique_active (a finished job holds no unique
-- key); the primary key for a job's lookup, (queue, finished_at) for the retention prune,
-- finished_at for the leader's look at the newest row.
CREATE TABLE backlog_job_done_0 (
    id                  BIGINT NOT NULL PRIMARY KEY,
    queue               VARCHAR(128) NOT NULL,
    kind                VARCHAR(128) NULL,
    payload             JSON NOT NULL,
    state               VARCHAR(16) NOT NULL,
    priority            SMALLINT NOT NULL,
    run_at              BIGINT NOT NULL,
    attempt             INT NOT NULL,
    max_attempts        INT NULL,
    lease_token         BIGINT NULL,
    lease_owner         VARCHAR(255) NULL,
    lease_expires_at    BIGINT NULL,
    unique_key          VARCHAR(255) NULL,
    errors              JSON NOT NULL,
    result              JSON NULL,
    progress            JSON NULL,
    created_at          BIGINT NOT NULL,
    attempted_at        BIGINT NULL,
    finished_at         BIGINT NULL,
    cancel_requested_at BIGINT NULL,
    trace_context       VARCHAR(1024) NULL,
    group_key           VARCHAR(255) NULL,
    shard               SMALLINT NOT NULL DEFAULT 0,
    KEY backlog_job_done_0_queue (queue, finished_at),
    KEY backlog_job_done_0_finished (finished_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE backlog_job_done_1 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_2 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_3 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_4 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_5 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_6 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_7 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_8 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_9 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_10 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_11 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_12 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_13 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_14 LIKE backlog_job_done_0;
CREATE TABLE backlog_job_done_15 LIKE backlog_job_done_0;

-- Where completions write: a view of one table (insertable), turned by the leader.
CREATE VIEW backlog_job_done_current AS
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard
FROM backlog_job_done_0;

-- Every kept completed job, with the table it is in (`slot`). A lookup by id reads one row of
-- each table: MariaDB pushes the condition into each part.
CREATE VIEW backlog_job_done AS
SELECT *, 0 AS slot FROM backlog_job_done_0
UNION ALL SELECT *, 1 AS slot FROM backlog_job_done_1
UNION ALL SELECT *, 2 AS slot FROM backlog_job_done_2
UNION ALL SELECT *, 3 AS slot FROM backlog_job_done_3
UNION ALL SELECT *, 4 AS slot FROM backlog_job_done_4
UNION ALL SELECT *, 5 AS slot FROM backlog_job_done_5
UNION ALL SELECT *, 6 AS slot FROM backlog_job_done_6
UNION ALL SELECT *, 7 AS slot FROM backlog_job_done_7
UNION ALL SELECT *, 8 AS slot FROM backlog_job_done_8
UNION ALL SELECT *, 9 AS slot FROM backlog_job_done_9
UNION ALL SELECT *, 10 AS slot FROM backlog_job_done_10
UNION ALL SELECT *, 11 AS slot FROM backlog_job_done_11
UNION ALL SELECT *, 12 AS slot FROM backlog_job_done_12
UNION ALL SELECT *, 13 AS slot FROM backlog_job_done_13
UNION ALL SELECT *, 14 AS slot FROM backlog_job_done_14
UNION ALL SELECT *, 15 AS slot FROM backlog_job_done_15;

-- Every job, wherever it is kept.
DROP VIEW backlog_job_all;
CREATE VIEW backlog_job_all AS
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard
FROM backlog_job
UNION ALL
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard
FROM backlog_job_done;
