-- backlog schema version 18 (SQLite): the workers, each registered while it runs (the
-- dashboard's and `backlog workers`' view). A worker upserts its row every few seconds with what
-- it runs, and deletes it when it stops; a row whose expires_at has passed is a worker that
-- stopped without saying so (killed). Rows expired an hour are deleted by the next worker's beat.
CREATE TABLE backlog_worker (
    id         TEXT PRIMARY KEY CHECK (id <> ''),
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    version    TEXT NOT NULL,
    -- The queues and each one's concurrency, as a JSON array of {"queue": …, "concurrency": …}.
    queues     TEXT NOT NULL CHECK (json_valid(queues)),
    -- Jobs running past their handler's first poll, at the last beat.
    running    INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
