-- backlog schema version 19 (SQLite): per-queue, per-state counts kept by the database, so
-- that stats, the queue list and /metrics read O(queues) rows instead of every job.
--
-- Row triggers on backlog_job and backlog_job_archive add each change to backlog_count, in the
-- changing statement's own transaction (a rollback takes it back): the runtime's statements, an
-- operator's, and a plain-SQL client's alike. SQLite has one writer at a time and no snapshot
-- another session can hold open against the writer's versions, so the counts are one row per
-- key, updated in place.
--
-- The state key is the stored state, but for an available job not yet due: `scheduled` (never
-- attempted) or `retrying`, with `due` its run_at cut to the second. A reader counts such a key
-- as available once `due` has passed; the writers classify with the same rule, so whichever
-- time a job was inserted and moved at, its changes cancel out. The leader folds keys whose
-- `due` has passed into `available`, due 0 (backlog_count_fold.sql). Archived jobs count under
-- `archived`; every other key has due 0.
CREATE TABLE backlog_count (
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    due   INTEGER NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state, due)
) WITHOUT ROWID;

CREATE TRIGGER backlog_job_count_insert AFTER INSERT ON backlog_job
BEGIN
    INSERT INTO backlog_count (queue, state, due, n)
    VALUES (NEW.queue, CASE WHEN NEW.state = 'available' AND NEW.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN (CASE WHEN NEW.attempt = 0 THEN 'scheduled' ELSE 'retrying' END) ELSE NEW.state END, CASE WHEN NEW.state = 'available' AND NEW.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN NEW.run_at / 1000000 * 1000000 ELSE 0 END, 1)
    ON CONFLICT (queue, state, due) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER backlog_job_count_delete AFTER DELETE ON backlog_job
BEGIN
    INSERT INTO backlog_count (queue, state, due, n)
    VALUES (OLD.queue, CASE WHEN OLD.state = 'available' AND OLD.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN (CASE WHEN OLD.attempt = 0 THEN 'scheduled' ELSE 'retrying' END) ELSE OLD.state END, CASE WHEN OLD.state = 'available' AND OLD.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN OLD.run_at / 1000000 * 1000000 ELSE 0 END, -1)
    ON CONFLICT (queue, state, due) DO UPDATE SET n = n - 1;
END;

-- Only when a column of the key changed; then only if the key did (a run-now within one second).
CREATE TRIGGER backlog_job_count_update AFTER UPDATE OF queue, state, run_at, attempt ON backlog_job
BEGIN
    INSERT INTO backlog_count (queue, state, due, n)
    SELECT queue, state, due, n FROM (
        SELECT OLD.queue AS queue, CASE WHEN OLD.state = 'available' AND OLD.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN (CASE WHEN OLD.attempt = 0 THEN 'scheduled' ELSE 'retrying' END) ELSE OLD.state END AS state, CASE WHEN OLD.state = 'available' AND OLD.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN OLD.run_at / 1000000 * 1000000 ELSE 0 END AS due, -1 AS n
        UNION ALL
        SELECT NEW.queue, CASE WHEN NEW.state = 'available' AND NEW.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN (CASE WHEN NEW.attempt = 0 THEN 'scheduled' ELSE 'retrying' END) ELSE NEW.state END, CASE WHEN NEW.state = 'available' AND NEW.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN NEW.run_at / 1000000 * 1000000 ELSE 0 END, 1)
    WHERE OLD.queue <> NEW.queue OR (CASE WHEN OLD.state = 'available' AND OLD.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN (CASE WHEN OLD.attempt = 0 THEN 'scheduled' ELSE 'retrying' END) ELSE OLD.state END) <> (CASE WHEN NEW.state = 'available' AND NEW.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN (CASE WHEN NEW.attempt = 0 THEN 'scheduled' ELSE 'retrying' END) ELSE NEW.state END) OR (CASE WHEN OLD.state = 'available' AND OLD.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN OLD.run_at / 1000000 * 1000000 ELSE 0 END) <> (CASE WHEN NEW.state = 'available' AND NEW.run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN NEW.run_at / 1000000 * 1000000 ELSE 0 END)
    ON CONFLICT (queue, state, due) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER backlog_job_archive_count_insert AFTER INSERT ON backlog_job_archive
BEGIN
    INSERT INTO backlog_count (queue, state, due, n) VALUES (NEW.queue, 'archived', 0, 1)
    ON CONFLICT (queue, state, due) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER backlog_job_archive_count_delete AFTER DELETE ON backlog_job_archive
BEGIN
    INSERT INTO backlog_count (queue, state, due, n) VALUES (OLD.queue, 'archived', 0, -1)
    ON CONFLICT (queue, state, due) DO UPDATE SET n = n - 1;
END;

CREATE TRIGGER backlog_job_archive_count_update AFTER UPDATE OF queue ON backlog_job_archive
BEGIN
    INSERT INTO backlog_count (queue, state, due, n)
    SELECT queue, 'archived', 0, n FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1)
    WHERE OLD.queue <> NEW.queue
    ON CONFLICT (queue, state, due) DO UPDATE SET n = n + excluded.n;
END;

-- The jobs already there, counted once (this migration runs in the writer's transaction).
INSERT INTO backlog_count (queue, state, due, n)
SELECT queue, k_state, k_due, COUNT(*)
FROM (SELECT queue,
             CASE WHEN state = 'available' AND run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)
                  THEN (CASE WHEN attempt = 0 THEN 'scheduled' ELSE 'retrying' END) ELSE state END AS k_state,
             CASE WHEN state = 'available' AND run_at / 1000000 * 1000000 > CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)
                  THEN run_at / 1000000 * 1000000 ELSE 0 END AS k_due
      FROM backlog_job)
GROUP BY queue, k_state, k_due;

INSERT INTO backlog_count (queue, state, due, n)
SELECT queue, 'archived', 0, COUNT(*) FROM backlog_job_archive WHERE true GROUP BY queue
ON CONFLICT (queue, state, due) DO UPDATE SET n = n + excluded.n;
