-- backlog schema version 7 (PostgreSQL): flow control across every process.
--
-- Ordered groups: a job may carry a group key; the jobs of one queue and group run in enqueue
-- order, at most the queue's group_concurrency of them available or running at once. The rest
-- wait in the state 'waiting', outside the claim index, so that a claim never looks at them and
-- costs what it costs without groups; finishing a job of a group makes the group's next one
-- available ("promotes" it). backlog_group holds one row per group, locked by whoever promotes
-- in that group, so that promotions of one group never race.
--
-- Global concurrency: at most global_concurrency jobs of the queue running at once, counted
-- where jobs are claimed (under the queue row's lock), over every process.
ALTER TABLE backlog_job ADD COLUMN group_key TEXT NULL CHECK (group_key <> '');
ALTER TABLE backlog_job_archive ADD COLUMN group_key TEXT NULL;

ALTER TABLE backlog_job DROP CONSTRAINT backlog_job_state_check;
ALTER TABLE backlog_job ADD CONSTRAINT backlog_job_state_check
    CHECK (state IN ('available', 'running', 'completed', 'dead', 'cancelled', 'held', 'waiting'))
    NOT VALID;
ALTER TABLE backlog_job VALIDATE CONSTRAINT backlog_job_state_check;

-- A waiting job holds its unique key like any job not finished.
DROP INDEX backlog_job_unique;
CREATE UNIQUE INDEX backlog_job_unique ON backlog_job (queue, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('available', 'running', 'held', 'waiting');

-- The jobs of a group that are not finished, in enqueue order: a group's next job and how many
-- of it run. Jobs without a group are never in it.
CREATE INDEX backlog_job_group ON backlog_job (queue, group_key, id)
    WHERE group_key IS NOT NULL AND state IN ('waiting', 'available', 'running');

CREATE TABLE backlog_group (
    queue     TEXT NOT NULL,
    group_key TEXT NOT NULL,
    turns     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, group_key)
);

ALTER TABLE backlog_queue ADD COLUMN global_concurrency INTEGER NULL
    CHECK (global_concurrency >= 1);
ALTER TABLE backlog_queue ADD COLUMN group_concurrency INTEGER NOT NULL DEFAULT 1
    CHECK (group_concurrency >= 1);
ALTER TABLE backlog_queue ADD COLUMN group_on_failure TEXT NOT NULL DEFAULT 'block'
    CHECK (group_on_failure IN ('block', 'next'));
