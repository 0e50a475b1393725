-- backlog schema version 2 (SQLite): the worker runtime's tables.
-- Cancellation of a running job is requested here and seen by its worker at the next heartbeat.
ALTER TABLE backlog_job ADD COLUMN cancel_requested_at INTEGER NULL;
ALTER TABLE backlog_job_archive ADD COLUMN cancel_requested_at INTEGER NULL;

-- Leader election without vendor locks: a lease row per name, with expiry and a term.
CREATE TABLE backlog_leader (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    term       INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

-- The last tick fired per periodic schedule, so that each tick fires exactly once.
CREATE TABLE backlog_cron (
    name      TEXT PRIMARY KEY,
    last_tick INTEGER NOT NULL
);

-- Fan-out: every queue subscribed to a topic gets its own copy of what is published to it.
CREATE TABLE backlog_subscription (
    topic      TEXT NOT NULL CHECK (topic <> ''),
    queue      TEXT NOT NULL CHECK (queue <> ''),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (topic, queue)
);
