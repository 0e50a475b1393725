-- backlog schema version 2 (PostgreSQL): the worker runtime's tables.
-- Cancellation of a running job is requested here and seen by its worker at the next heartbeat.
ALTER TABLE backlog_job ADD COLUMN cancel_requested_at BIGINT NULL;
ALTER TABLE backlog_job_archive ADD COLUMN cancel_requested_at BIGINT NULL;

-- Leader election without vendor locks: a lease row per name, with expiry and a term.
CREATE TABLE backlog_leader (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    term       BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- The last tick fired per periodic schedule, so that each tick fires exactly once.
CREATE TABLE backlog_cron (
    name      TEXT PRIMARY KEY,
    last_tick BIGINT NOT NULL
);

-- Fan-out: every queue subscribed to a topic gets its own copy of what is published to it.
CREATE TABLE backlog_subscription (
    topic      TEXT NOT NULL CHECK (topic <> ''),
    queue      TEXT NOT NULL CHECK (queue <> ''),
    created_at BIGINT NOT NULL,
    PRIMARY KEY (topic, queue)
);

-- Wake-ups: one NOTIFY per queue per INSERT statement (the payload is the queue name), from a
-- statement-level trigger over the transition table, so that rows inserted by plain SQL from any
-- language wake workers too. Not per row: a trigger call and a queued notification per row
-- would tax big batches for nothing. Delivered at commit; a rolled-back insert wakes nobody.
CREATE FUNCTION backlog_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('backlog_job', q)
    FROM (SELECT DISTINCT queue AS q FROM new_rows WHERE state = 'available') s;
    RETURN NULL;
END
$$;

CREATE TRIGGER backlog_job_notify
    AFTER INSERT ON backlog_job
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_notify();
