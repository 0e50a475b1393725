-- backlog schema version 7 (SQLite): flow control across every process.
--
-- Ordered groups: a job may carry a group key; the jobs of one queue and group run in enqueue
-- order, at most the queue's group_concurrency of them available or running at once. The rest
-- wait in the state 'waiting', outside the claim index, so that a claim never looks at them;
-- finishing a job of a group makes the group's next one available ("promotes" it).
-- backlog_group holds one row per group (a lock row elsewhere; here the one writer serializes).
--
-- Global concurrency: at most global_concurrency jobs of the queue running at once, counted
-- where jobs are claimed.
--
-- SQLite cannot change a CHECK constraint in place, so backlog_job is rebuilt (the documented
-- way: a new table, the rows copied, the old one dropped, the new one renamed, its indexes made
-- again). Ids keep counting from where they were: AUTOINCREMENT's counter is carried over, so
-- no id is ever used twice.
CREATE TABLE backlog_job_new (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: ids are never reused
    queue               TEXT NOT NULL CHECK (queue <> ''),
    kind                TEXT NULL,
    payload             TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    state               TEXT NOT NULL DEFAULT 'available'
                        CHECK (state IN ('available', 'running', 'completed', 'dead', 'cancelled',
                                         'held', 'waiting')),
    priority            INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -32768 AND 32767),
    run_at              INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)),
    attempt             INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NULL CHECK (max_attempts >= 1),
    lease_token         INTEGER NULL,
    lease_owner         TEXT NULL,
    lease_expires_at    INTEGER NULL,
    unique_key          TEXT NULL,
    errors              TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(errors)),
    result              TEXT NULL CHECK (result IS NULL OR json_valid(result)),
    progress            TEXT NULL CHECK (progress IS NULL OR json_valid(progress)),
    created_at          INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)),
    attempted_at        INTEGER NULL,
    finished_at         INTEGER NULL,
    cancel_requested_at INTEGER NULL,
    trace_context       TEXT NULL,
    group_key           TEXT NULL CHECK (group_key <> '')
);
INSERT INTO backlog_job_new
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context)
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context
FROM backlog_job;
CREATE TEMP TABLE backlog_job_seq AS SELECT seq FROM sqlite_sequence WHERE name = 'backlog_job';
DROP TABLE backlog_job;
ALTER TABLE backlog_job_new RENAME TO backlog_job;
UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT max(seq) FROM temp.backlog_job_seq), 0))
WHERE name = 'backlog_job';
DROP TABLE temp.backlog_job_seq;

CREATE INDEX backlog_job_claim ON backlog_job (queue, priority, run_at, id) WHERE state = 'available';
CREATE INDEX backlog_job_lease ON backlog_job (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX backlog_job_rest ON backlog_job (queue, state, id) WHERE state NOT IN ('available', 'running');
-- A waiting job holds its unique key like any job not finished.
CREATE UNIQUE INDEX backlog_job_unique ON backlog_job (queue, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('available', 'running', 'held', 'waiting');
-- The jobs of a group, in enqueue order. Jobs without a group are never in it. (Not only the
-- unfinished ones, as on PostgreSQL: SQLite uses a partial index only for a query that names
-- its condition term for term, and `state IN (…)` of another list is not that.)
CREATE INDEX backlog_job_group ON backlog_job (queue, group_key, id) WHERE group_key IS NOT NULL;

ALTER TABLE backlog_job_archive ADD COLUMN group_key TEXT NULL;

CREATE TABLE backlog_group (
    queue     TEXT NOT NULL,
    group_key TEXT NOT NULL,
    turns     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, group_key)
);

ALTER TABLE backlog_queue ADD COLUMN global_concurrency INTEGER NULL
    CHECK (global_concurrency >= 1);
ALTER TABLE backlog_queue ADD COLUMN group_concurrency INTEGER NOT NULL DEFAULT 1
    CHECK (group_concurrency >= 1);
ALTER TABLE backlog_queue ADD COLUMN group_on_failure TEXT NOT NULL DEFAULT 'block'
    CHECK (group_on_failure IN ('block', 'next'));
