-- backlog schema version 7 (MySQL, MariaDB): flow control across every process.
--
-- Ordered groups: a job may carry a group key; the jobs of one queue and group run in enqueue
-- order, at most the queue's group_concurrency of them available or running at once. The rest
-- wait in the state 'waiting', outside what a claim reads, so that a claim costs what it costs
-- without groups; finishing a job of a group makes the group's next one available ("promotes"
-- it). backlog_group holds one row per group, locked by whoever promotes in that group, so that
-- promotions of one group never race.
--
-- Global concurrency: at most global_concurrency jobs of the queue running at once, counted
-- where jobs are claimed (under the queue row's lock), over every process.
-- DDL commits statement by statement here, so each statement stands alone.
ALTER TABLE backlog_job ADD COLUMN group_key VARCHAR(255) NULL;
ALTER TABLE backlog_job_archive ADD COLUMN group_key VARCHAR(255) NULL;
ALTER TABLE backlog_job DROP CONSTRAINT backlog_job_state;
ALTER TABLE backlog_job ADD CONSTRAINT backlog_job_state
    CHECK (state IN ('available', 'running', 'completed', 'dead', 'cancelled', 'held', 'waiting'));
ALTER TABLE backlog_job ADD CONSTRAINT backlog_job_group_key CHECK (group_key <> '');
-- A waiting job holds its unique key like any job not finished.
ALTER TABLE backlog_job MODIFY COLUMN unique_active VARCHAR(255) GENERATED ALWAYS AS
    (CASE WHEN state IN ('available', 'running', 'held', 'waiting') THEN unique_key END) STORED;
-- A group's jobs in enqueue order. Not the state: a claim or a completion of a job without a
-- group would then move its entry; as it is, they never touch this index.
CREATE INDEX backlog_job_group ON backlog_job (queue, group_key, id);
CREATE TABLE backlog_group (
    queue     VARCHAR(128) NOT NULL,
    group_key VARCHAR(255) NOT NULL,
    turns     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, group_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
ALTER TABLE backlog_queue ADD COLUMN global_concurrency INT NULL;
ALTER TABLE backlog_queue ADD COLUMN group_concurrency INT NOT NULL DEFAULT 1;
ALTER TABLE backlog_queue ADD COLUMN group_on_failure VARCHAR(8) NOT NULL DEFAULT 'block';
ALTER TABLE backlog_queue ADD CONSTRAINT backlog_queue_flow CHECK (
    (global_concurrency IS NULL OR global_concurrency >= 1) AND group_concurrency >= 1
    AND group_on_failure IN ('block', 'next'));
