-- backlog schema version 20 (SQLite): jobs that wait for other jobs (issue 47).
--
-- A job may name parents when it is enqueued: it waits (state `waiting`, `deps_left` its
-- parents not yet ended) until every one has ended, and is released in the transaction that ends
-- the last of them. An edge of backlog_job_dep is (parent, child, policy); the parent's
-- `has_dependents` says it has edges, so the triggers' WHEN clauses pass over every other row.
--
-- The release is the database's, so every writer does it in its own transaction (backlog's
-- statements, the clients', an operator's, a plain-SQL consumer's): when a row with
-- `has_dependents` leaves the unfinished states, its waiting children with policy `cancel` are
-- cancelled if it ended dead, cancelled or deleted before it ran, and the others count one
-- parent fewer, each made available (due no earlier than now) when none is left. SQLite has one
-- writer and updates rows in place, so one update of a child per parent costs no more than a
-- summed one. A deleted row that was running is a completion (completions of retention
-- `delete` delete it). A cancelled child ends in turn: the cascade needs recursive triggers
-- (`PRAGMA recursive_triggers = ON`), which backlog's connections set; a connection without
-- them cancels the children of a failed job but not their own children (docs/sql.md).
ALTER TABLE backlog_job ADD COLUMN deps_left INTEGER NOT NULL DEFAULT 0 CHECK (deps_left >= 0);
ALTER TABLE backlog_job ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;

CREATE TABLE backlog_job_dep (
    parent_id INTEGER NOT NULL,
    child_id  INTEGER NOT NULL,
    policy    TEXT NOT NULL DEFAULT 'cancel' CHECK (policy IN ('cancel', 'run', 'ignore')),
    PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;
CREATE INDEX backlog_job_dep_child ON backlog_job_dep (child_id);

CREATE TRIGGER backlog_job_deps_update AFTER UPDATE OF state ON backlog_job
WHEN OLD.has_dependents AND OLD.state IN ('available', 'running', 'held', 'waiting')
     AND NEW.state IN ('completed', 'dead', 'cancelled')
BEGIN
    UPDATE backlog_job
    SET state = 'cancelled', deps_left = deps_left - 1, finished_at = CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER),
        errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER),
                 'error', 'cancelled: job ' || NEW.id || ', which it waited for, ended ' || NEW.state))
    WHERE NEW.state <> 'completed' AND state = 'waiting' AND deps_left > 0
      AND id IN (SELECT child_id FROM backlog_job_dep WHERE parent_id = NEW.id AND policy = 'cancel');
    UPDATE backlog_job
    SET deps_left = deps_left - 1,
        state = CASE WHEN deps_left = 1 THEN 'available' ELSE 'waiting' END,
        run_at = CASE WHEN deps_left = 1 AND run_at < CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) ELSE run_at END
    WHERE state = 'waiting' AND deps_left > 0
      AND id IN (SELECT child_id FROM backlog_job_dep WHERE parent_id = NEW.id);
END;

CREATE TRIGGER backlog_job_deps_delete AFTER DELETE ON backlog_job
WHEN OLD.has_dependents AND OLD.state IN ('available', 'running', 'held', 'waiting')
BEGIN
    UPDATE backlog_job
    SET state = 'cancelled', deps_left = deps_left - 1, finished_at = CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER),
        errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER),
                 'error', 'cancelled: job ' || OLD.id || ', which it waited for, ended deleted'))
    WHERE OLD.state <> 'running' AND state = 'waiting' AND deps_left > 0
      AND id IN (SELECT child_id FROM backlog_job_dep WHERE parent_id = OLD.id AND policy = 'cancel');
    UPDATE backlog_job
    SET deps_left = deps_left - 1,
        state = CASE WHEN deps_left = 1 THEN 'available' ELSE 'waiting' END,
        run_at = CASE WHEN deps_left = 1 AND run_at < CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) THEN CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) ELSE run_at END
    WHERE state = 'waiting' AND deps_left > 0
      AND id IN (SELECT child_id FROM backlog_job_dep WHERE parent_id = OLD.id);
END;
