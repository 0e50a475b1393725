-- backlog schema version 20 (MySQL/MariaDB): jobs that wait for other jobs (issue 47).
--
-- A job may name parents when it is enqueued: it waits (state `waiting`, `deps_left` its
-- parents not yet ended) until every one has ended, and is released in the transaction that ends
-- the last of them. An edge of backlog_job_dep is (parent, child, policy); the parent's
-- `has_dependents` says it has edges. MySQL has no trigger condition that spares the other rows
-- (a row trigger costs every row it is declared for: 12% of a batched insert with an empty
-- body), so here backlog's own statements do the release (docs/sql.md, "Dependencies").
ALTER TABLE backlog_job
    ADD COLUMN deps_left INT NOT NULL DEFAULT 0,
    ADD COLUMN has_dependents BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE backlog_job_dep (
    parent_id BIGINT NOT NULL,
    child_id  BIGINT NOT NULL,
    policy    VARCHAR(8) NOT NULL DEFAULT 'cancel',
    PRIMARY KEY (parent_id, child_id),
    KEY backlog_job_dep_child (child_id),
    CONSTRAINT backlog_job_dep_policy CHECK (policy IN ('cancel', 'run', 'ignore'))
);
