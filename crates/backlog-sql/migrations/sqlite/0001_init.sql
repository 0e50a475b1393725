-- backlog schema version 1 (SQLite). Times are microseconds since the Unix epoch, UTC.
-- julianday() rather than unixepoch('subsec') so that older sqlite3 shells can insert too.
CREATE TABLE backlog_queue (
    name            TEXT PRIMARY KEY CHECK (name <> ''),
    paused          INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    max_attempts    INTEGER NOT NULL DEFAULT 25 CHECK (max_attempts >= 1),
    backoff_base_ms INTEGER NOT NULL DEFAULT 1000 CHECK (backoff_base_ms >= 0),
    backoff_max_ms  INTEGER NOT NULL DEFAULT 3600000 CHECK (backoff_max_ms >= 0),
    lease_ms        INTEGER NOT NULL DEFAULT 30000 CHECK (lease_ms >= 1),
    ordering        TEXT NOT NULL DEFAULT 'fifo' CHECK (ordering IN ('fifo', 'lifo')),
    retention       TEXT NOT NULL DEFAULT 'keep' CHECK (retention IN ('delete', 'keep', 'archive')),
    concurrency     INTEGER NULL CHECK (concurrency >= 1),
    created_at      INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)),
    updated_at      INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER))
);

CREATE TABLE backlog_job (
    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: ids are never reused
    queue            TEXT NOT NULL CHECK (queue <> ''),
    kind             TEXT NULL,
    payload          TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    state            TEXT NOT NULL DEFAULT 'available'
                     CHECK (state IN ('available', 'running', 'completed', 'dead', 'cancelled', 'held')),
    priority         INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -32768 AND 32767),
    run_at           INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)),
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NULL CHECK (max_attempts >= 1),
    lease_token      INTEGER NULL,
    lease_owner      TEXT NULL,
    lease_expires_at INTEGER NULL,
    unique_key       TEXT NULL,
    errors           TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(errors)),
    result           TEXT NULL CHECK (result IS NULL OR json_valid(result)),
    progress         TEXT NULL CHECK (progress IS NULL OR json_valid(progress)),
    created_at       INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)),
    attempted_at     INTEGER NULL,
    finished_at      INTEGER NULL
);

CREATE INDEX backlog_job_claim ON backlog_job (queue, priority, run_at, id) WHERE state = 'available';
CREATE INDEX backlog_job_lease ON backlog_job (lease_expires_at) WHERE state = 'running';
CREATE INDEX backlog_job_rest ON backlog_job (queue, state, id) WHERE state NOT IN ('available', 'running');
CREATE UNIQUE INDEX backlog_job_unique ON backlog_job (queue, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('available', 'running', 'held');

CREATE TABLE backlog_job_archive (
    id               INTEGER PRIMARY KEY,
    queue            TEXT NOT NULL,
    kind             TEXT NULL,
    payload          TEXT NOT NULL,
    state            TEXT NOT NULL,
    priority         INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    attempt          INTEGER NOT NULL,
    max_attempts     INTEGER NULL,
    lease_token      INTEGER NULL,
    lease_owner      TEXT NULL,
    lease_expires_at INTEGER NULL,
    unique_key       TEXT NULL,
    errors           TEXT NOT NULL,
    result           TEXT NULL,
    progress         TEXT NULL,
    created_at       INTEGER NOT NULL,
    attempted_at     INTEGER NULL,
    finished_at      INTEGER NULL
);
