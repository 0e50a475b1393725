-- backlog schema version 20 (PostgreSQL): jobs that wait for other jobs (issue 47).
--
-- A job may name parents when it is enqueued: it waits (state `waiting`, `deps_left` its
-- parents not yet ended) until every one has ended, and is released in the transaction that ends
-- the last of them. An edge of backlog_job_dep is (parent, child, policy); the parent's
-- `has_dependents` says it has edges, so the triggers below look for nothing else.
--
-- The release is the database's: two statement triggers on backlog_job (AFTER UPDATE, AFTER
-- DELETE) find, in the statement's transition tables (which the counts' triggers of version 19
-- already capture), the rows with `has_dependents` that left the unfinished states, and hand them
-- to backlog_job_deps_release(): per child, the parents ended in the statement are summed (one
-- update of a child per statement, not one per parent: a fan-in of 100,000 parents completed
-- 100 a statement writes its child 1,000 times); the children are locked in id order, counted
-- down, made available when none is left (due no earlier than now, with a NOTIFY of their
-- queues), or cancelled when a parent ended dead or cancelled and the edge's policy is
-- `cancel`. A cancelled child is an update of backlog_job that fires the same triggers: the
-- cascade. So every writer releases exactly once, in its own transaction: backlog's statements,
-- the clients', an operator's and a plain-SQL consumer's. A deleted row that was running is a
-- completion (completions delete the row, moving a kept one into backlog_job_done); one deleted
-- before it ran (job delete) ends as `deleted`, a failure for the policies.
ALTER TABLE backlog_job
    ADD COLUMN deps_left INTEGER NOT NULL DEFAULT 0 CHECK (deps_left >= 0),
    ADD COLUMN has_dependents BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE backlog_job_dep (
    parent_id BIGINT NOT NULL,
    child_id  BIGINT NOT NULL,
    policy    TEXT NOT NULL DEFAULT 'cancel' CHECK (policy IN ('cancel', 'run', 'ignore')),
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX backlog_job_dep_child ON backlog_job_dep (child_id);

-- The children of parents that ended in one statement: `ids` and how each ended (`completed`,
-- `dead`, `cancelled` or `deleted`).
CREATE FUNCTION backlog_job_deps_release(ids BIGINT[], hows TEXT[]) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    now_us BIGINT := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    woken TEXT[];
BEGIN
    WITH ended AS (
        SELECT * FROM unnest(ids, hows) AS e(id, how)
    ), d AS (
        SELECT dep.child_id, count(*)::int AS n,
               (array_agg(e.id ORDER BY e.id)
                    FILTER (WHERE e.how <> 'completed' AND dep.policy = 'cancel'))[1] AS cause,
               (array_agg(e.how ORDER BY e.id)
                    FILTER (WHERE e.how <> 'completed' AND dep.policy = 'cancel'))[1] AS cause_how
        FROM ended e JOIN backlog_job_dep dep ON dep.parent_id = e.id
        GROUP BY dep.child_id
    ), locked AS (
        SELECT j.id FROM backlog_job j
        WHERE j.id IN (SELECT child_id FROM d) AND j.state = 'waiting' AND j.deps_left > 0
        ORDER BY j.id
        FOR UPDATE
    ), changed AS (
        UPDATE backlog_job j
        SET deps_left = greatest(j.deps_left - d.n, 0),
            state = CASE WHEN d.cause IS NOT NULL THEN 'cancelled'
                         WHEN j.deps_left - d.n <= 0 THEN 'available'
                         ELSE 'waiting' END,
            run_at = CASE WHEN d.cause IS NULL AND j.deps_left - d.n <= 0
                          THEN greatest(j.run_at, now_us) ELSE j.run_at END,
            finished_at = CASE WHEN d.cause IS NOT NULL THEN now_us ELSE j.finished_at END,
            errors = CASE WHEN d.cause IS NULL THEN j.errors
                          ELSE j.errors || jsonb_build_array(jsonb_build_object(
                              'attempt', j.attempt, 'at', now_us,
                              'error', format('cancelled: job %s, which it waited for, ended %s',
                                              d.cause, d.cause_how))) END
        FROM d
        WHERE j.id = d.child_id AND j.id IN (SELECT id FROM locked)
        RETURNING j.queue, j.state, j.run_at
    )
    SELECT array_agg(DISTINCT queue) INTO woken
    FROM changed WHERE state = 'available' AND run_at <= now_us;
    PERFORM pg_notify('backlog_job', q) FROM unnest(woken) AS q;
END
$$;

CREATE FUNCTION backlog_job_deps_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ids BIGINT[];
    hows TEXT[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_rows WHERE has_dependents) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        SELECT array_agg(id), array_agg(CASE WHEN state = 'running' THEN 'completed' ELSE 'deleted' END)
        INTO ids, hows
        FROM old_rows
        WHERE has_dependents AND state IN ('available', 'running', 'held', 'waiting');
    ELSE
        SELECT array_agg(o.id), array_agg(n.state)
        INTO ids, hows
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE o.has_dependents AND o.state IN ('available', 'running', 'held', 'waiting')
          AND n.state IN ('completed', 'dead', 'cancelled');
    END IF;
    IF ids IS NOT NULL THEN
        PERFORM backlog_job_deps_release(ids, hows);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER backlog_job_deps_update AFTER UPDATE ON backlog_job
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_deps_ended();
CREATE TRIGGER backlog_job_deps_delete AFTER DELETE ON backlog_job
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_deps_ended();
