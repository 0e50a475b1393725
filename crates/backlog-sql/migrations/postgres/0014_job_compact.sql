-- backlog schema version 14 (PostgreSQL): compaction of the job table while another session's
-- snapshot keeps its dead rows.
--
-- VACUUM may remove a dead row only once no snapshot can see it, so a session that holds an old
-- snapshot (a REPEATABLE READ report, an idle-in-transaction connection, a replica with
-- hot_standby_feedback) keeps every version that completed jobs leave, and the table grows
-- until it ends. TRUNCATE frees a table's storage whatever any snapshot sees. This function
-- copies the table's rows (the live ones: jobs queued, running, held, or kept after they
-- finished), empties the table and puts them back, under an ACCESS EXCLUSIVE lock that it waits
-- for at most lock_wait_ms, in the caller's transaction. It leaves the table alone, returning
-- NULL, when the table holds more than max_live rows (the copy would hold the lock too long),
-- when another session's transaction older than lock_wait_ms holds a lock on the table (its
-- snapshot may still read it: pg_dump, a report over the jobs, a transactional enqueue left
-- open), or when the lock does not come in time. Otherwise it returns the rows it kept. Ids,
-- lease tokens and every column stay as they were.
--
-- What it costs another session: a snapshot taken before the compaction that reads backlog_job
-- only after it sees none of the rows put back (TRUNCATE is not MVCC-safe); backlog's own
-- statements read with fresh snapshots and are not affected. Sessions that need the table wait
-- for the lock and the copy, a few milliseconds for a few thousand rows.
CREATE FUNCTION backlog_job_compact(max_live BIGINT, lock_wait_ms INTEGER) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    kept_rows backlog_job[];
    kept BIGINT;
    timeout TEXT := current_setting('lock_timeout');
BEGIN
    IF max_live IS NULL OR max_live < 0 OR lock_wait_ms IS NULL OR lock_wait_ms < 1 THEN
        RAISE EXCEPTION 'backlog_job_compact: max_live must be >= 0 and lock_wait_ms >= 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (
        SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'relation' AND l.relation = 'backlog_job'::regclass
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.pid <> pg_backend_pid()
          AND a.xact_start < clock_timestamp() - make_interval(secs => lock_wait_ms / 1000.0)
    ) THEN
        RETURN NULL;
    END IF;
    BEGIN
        PERFORM set_config('lock_timeout', lock_wait_ms || 'ms', true);
        LOCK TABLE backlog_job IN ACCESS EXCLUSIVE MODE;
        PERFORM set_config('lock_timeout', timeout, true);
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', timeout, true);
        RETURN NULL;
    END;
    SELECT array_agg(j), count(*) INTO kept_rows, kept
    FROM (SELECT * FROM backlog_job LIMIT max_live + 1) j;
    IF kept > max_live THEN
        RETURN NULL;
    END IF;
    TRUNCATE backlog_job;
    IF kept > 0 THEN
        INSERT INTO backlog_job SELECT * FROM unnest(kept_rows);
    END IF;
    RETURN kept;
END
$$;
