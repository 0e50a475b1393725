-- backlog schema version 16 (PostgreSQL): completed jobs kept in a ring of partitions, each
-- emptied whole once the retention prune has deleted its rows.
--
-- The prune deletes kept jobs row by row; while another session holds an old snapshot, VACUUM
-- cannot remove those rows, and backlog_job_done grew by every row pruned meanwhile (26 MiB a
-- minute at 2,000 jobs/s). A partition whose rows are all deleted can be emptied by TRUNCATE,
-- whatever a snapshot still sees. backlog_job_done is now partitioned by `slot` into 16
-- partitions, backlog_job_done_0 … backlog_job_done_15; a completion writes its job into the
-- slot of its finish time, (finished_at / period_us) % 16, so one partition is written at a time
-- and each holds the jobs that finished in one period of every 16. backlog_job_done_empty()
-- truncates the partitions left with no row. The leader sets period_us from how long completed
-- jobs are kept, so that a partition is pruned empty well before its slot comes round again.
CREATE TABLE backlog_job_done_ring (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    period_us BIGINT NOT NULL CHECK (period_us > 0)
);
-- Two hours: for the default 24 hours' keep.
INSERT INTO backlog_job_done_ring (period_us) VALUES (7200000000);

-- The slot of a job that finished at `finished_at` (microseconds since the epoch).
CREATE FUNCTION backlog_job_done_slot(finished_at BIGINT) RETURNS SMALLINT
LANGUAGE sql STABLE AS $$
    SELECT ((COALESCE(finished_at, 0) / period_us) % 16)::smallint FROM backlog_job_done_ring
$$;

-- The version 15 table becomes the ring: its rows are copied once (this runs while completions
-- wait for the old table's lock; a version 15 database holds at most the kept window).
DROP VIEW backlog_job_all;
ALTER TABLE backlog_job_done RENAME TO backlog_job_done_v15;
ALTER INDEX backlog_job_done_finished RENAME TO backlog_job_done_v15_finished;
CREATE TABLE backlog_job_done (LIKE backlog_job INCLUDING DEFAULTS, slot SMALLINT NOT NULL)
    PARTITION BY LIST (slot);
DO $$
BEGIN
    FOR s IN 0..15 LOOP
        EXECUTE format('CREATE TABLE backlog_job_done_%s PARTITION OF backlog_job_done '
                       'FOR VALUES IN (%s)', s, s);
    END LOOP;
END
$$;
-- No primary key: a partitioned table's must hold the partition key. A job's id is still one
-- row's: completions move it here out of backlog_job, and a retry moves it back.
CREATE INDEX backlog_job_done_id ON backlog_job_done (id);
CREATE INDEX backlog_job_done_finished ON backlog_job_done (queue, finished_at);
INSERT INTO backlog_job_done
SELECT v.*, backlog_job_done_slot(v.finished_at) FROM backlog_job_done_v15 v;
DROP TABLE backlog_job_done_v15;

-- Every job, wherever it is kept (the `slot` is the ring's, not the job's).
CREATE VIEW backlog_job_all AS
    SELECT * FROM backlog_job
    UNION ALL
    SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
           lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
           attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard
    FROM backlog_job_done;

-- Empties (TRUNCATE) each partition of backlog_job_done that holds no row, in the caller's
-- transaction, and returns how many it emptied. The statistics pick the candidates (pages on
-- disk, no live row counted); each is locked ACCESS EXCLUSIVE, waiting at most lock_wait_ms, and
-- read again under the lock, so no row a completion wrote meanwhile is lost. It passes over a
-- partition that another session's transaction older than lock_wait_ms holds a lock on (its
-- snapshot may still read it: pg_dump, a report), and one whose lock does not come in time.
-- What it costs another session: a snapshot taken before the TRUNCATE that reads the partition
-- after it finds it empty (TRUNCATE is not MVCC-safe); the rows it would have seen were deleted
-- by the prune already.
CREATE FUNCTION backlog_job_done_empty(lock_wait_ms INTEGER) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
    part REGCLASS;
    live BOOLEAN;
    emptied INTEGER := 0;
    timeout TEXT := current_setting('lock_timeout');
BEGIN
    IF lock_wait_ms IS NULL OR lock_wait_ms < 1 THEN
        RAISE EXCEPTION 'backlog_job_done_empty: lock_wait_ms must be >= 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR part IN
        SELECT i.inhrelid::regclass FROM pg_inherits i
        LEFT JOIN pg_stat_all_tables s ON s.relid = i.inhrelid
        WHERE i.inhparent = 'backlog_job_done'::regclass
          AND pg_relation_size(i.inhrelid) > 0 AND COALESCE(s.n_live_tup, 0) = 0
        ORDER BY i.inhrelid
    LOOP
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'relation' AND l.relation = part
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND l.pid <> pg_backend_pid()
              AND a.xact_start < clock_timestamp() - make_interval(secs => lock_wait_ms / 1000.0)
        );
        BEGIN
            PERFORM set_config('lock_timeout', lock_wait_ms || 'ms', true);
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', part);
            PERFORM set_config('lock_timeout', timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            PERFORM set_config('lock_timeout', timeout, true);
            CONTINUE;
        END;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', part) INTO live;
        IF NOT live THEN
            EXECUTE format('TRUNCATE %s', part);
            emptied := emptied + 1;
        END IF;
    END LOOP;
    RETURN emptied;
END
$$;
