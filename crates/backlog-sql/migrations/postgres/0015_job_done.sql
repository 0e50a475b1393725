-- backlog schema version 15 (PostgreSQL): completed jobs kept apart from the jobs still to run.
--
-- A completion under retention `keep` (the default) moves the job's row here, in the statement
-- that completes it, instead of updating it in place. backlog_job then holds the jobs still to
-- run (and dead and cancelled ones), so a compaction (backlog_job_compact, version 14) copies a
-- few rows however many completed jobs a queue keeps, and a held snapshot no longer grows the
-- job table with the kept jobs' versions. This table is written by inserts, and emptied by the
-- leader's retention prune (by queue, oldest finish first).
--
-- Completed rows may still be in backlog_job: those completed before this version, and those a
-- plain-SQL consumer marks completed in place (docs/sql.md). Every read looks in both; a retry of
-- a completed job moves it back.
CREATE TABLE backlog_job_done (LIKE backlog_job INCLUDING DEFAULTS);
ALTER TABLE backlog_job_done ADD PRIMARY KEY (id);
CREATE INDEX backlog_job_done_finished ON backlog_job_done (queue, finished_at);

-- Every job, wherever it is kept: the view a reader of jobs (a report, a count of a queue's jobs)
-- reads instead of backlog_job. The tables have the same columns in the same order (LIKE); a
-- migration that adds a column to both makes the view again.
CREATE VIEW backlog_job_all AS
    SELECT * FROM backlog_job
    UNION ALL
    SELECT * FROM backlog_job_done;

-- The same compaction as backlog_job_compact (version 14) for backlog_job_done: the prune deletes
-- kept jobs row by row once their window has passed, and a held snapshot keeps those rows as it
-- keeps the job table's. Rows copied, table emptied, rows put back, under a lock waited for at
-- most lock_wait_ms; NULL when left alone (more than max_live rows, an older transaction of
-- another session holds a lock on the table, or the lock did not come in time).
CREATE FUNCTION backlog_job_done_compact(max_live BIGINT, lock_wait_ms INTEGER) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    kept_rows backlog_job_done[];
    kept BIGINT;
    timeout TEXT := current_setting('lock_timeout');
BEGIN
    IF max_live IS NULL OR max_live < 0 OR lock_wait_ms IS NULL OR lock_wait_ms < 1 THEN
        RAISE EXCEPTION 'backlog_job_done_compact: max_live must be >= 0 and lock_wait_ms >= 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (
        SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'relation' AND l.relation = 'backlog_job_done'::regclass
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.pid <> pg_backend_pid()
          AND a.xact_start < clock_timestamp() - make_interval(secs => lock_wait_ms / 1000.0)
    ) THEN
        RETURN NULL;
    END IF;
    BEGIN
        PERFORM set_config('lock_timeout', lock_wait_ms || 'ms', true);
        LOCK TABLE backlog_job_done IN ACCESS EXCLUSIVE MODE;
        PERFORM set_config('lock_timeout', timeout, true);
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', timeout, true);
        RETURN NULL;
    END;
    SELECT array_agg(j), count(*) INTO kept_rows, kept
    FROM (SELECT * FROM backlog_job_done LIMIT max_live + 1) j;
    IF kept > max_live THEN
        RETURN NULL;
    END IF;
    TRUNCATE backlog_job_done;
    IF kept > 0 THEN
        INSERT INTO backlog_job_done SELECT * FROM unnest(kept_rows);
    END IF;
    RETURN kept;
END
$$;
