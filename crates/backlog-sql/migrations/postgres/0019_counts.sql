-- backlog schema version 19 (PostgreSQL): per-queue, per-state counts kept by the database, so
-- that stats, the queue list and /metrics read O(queues) rows instead of every job.
--
-- Triggers on backlog_job, backlog_job_done and backlog_job_archive write, for each statement
-- that inserts, moves or deletes jobs, one delta row per (queue, state key) it changed, into
-- backlog_count: the runtime's statements, an operator's, and a plain-SQL client's alike, in the
-- statement's own transaction (a rollback or a crash takes its deltas with it). A job's count
-- is the sum of its key's deltas.
--
-- The state key is the stored state, but for an available job not yet due: `scheduled` (never
-- attempted) or `retrying`, with `due` its run_at cut to the second. A reader counts such a key
-- as available once `due` has passed; the writers classify with the same rule (a row whose
-- `due` has passed is `available`, due 0), so whichever time a job was inserted and moved at,
-- its deltas cancel out. Every other key has due 0.
--
-- No counter row is ever updated: an update leaves a dead version, which a held snapshot keeps
-- (issue 43). backlog_count is a ring of 8 partitions by `slot`; a statement writes into the
-- slot of its time, (seconds / 4) % 8, insert-only. backlog_count_fold() (the leader, every few
-- seconds) folds each other slot into the current one: it locks the slot ACCESS EXCLUSIVE (so
-- no writer still holds rows in it), inserts its sums into the current slot (a due key becomes
-- `available`), and empties it with TRUNCATE, which frees its storage whatever a snapshot sees.
CREATE TABLE backlog_count (
    slot  SMALLINT NOT NULL,
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    due   BIGINT NOT NULL,
    n     BIGINT NOT NULL
) PARTITION BY LIST (slot);
DO $$
BEGIN
    FOR s IN 0..7 LOOP
        EXECUTE format('CREATE TABLE backlog_count_%s PARTITION OF backlog_count '
                       'FOR VALUES IN (%s)', s, s);
    END LOOP;
END
$$;

-- The slot a statement at this moment writes into.
CREATE FUNCTION backlog_count_slot() RETURNS SMALLINT
LANGUAGE sql STABLE AS $$
    SELECT ((extract(epoch FROM statement_timestamp())::bigint / 4) % 8)::smallint
$$;

-- The deltas of one statement on backlog_job: +1 for each new row's key, -1 for each old row's
-- (an update's rows whose key did not change cancel out and write nothing). A statement of
-- backlog_job_compact() (which puts back the rows it emptied) sets backlog.uncounted = on.
CREATE FUNCTION backlog_job_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    now_us BIGINT := (extract(epoch FROM statement_timestamp()) * 1000000)::bigint;
BEGIN
    IF current_setting('backlog.uncounted', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO backlog_count (slot, queue, state, due, n)
        SELECT backlog_count_slot(), queue, k.state, k.due, count(*)
        FROM new_rows,
             LATERAL (SELECT CASE WHEN state = 'available' AND run_at / 1000000 * 1000000 > now_us
                                  THEN (CASE WHEN attempt = 0 THEN 'scheduled' ELSE 'retrying' END)
                                  ELSE state END AS state,
                             CASE WHEN state = 'available' AND run_at / 1000000 * 1000000 > now_us
                                  THEN run_at / 1000000 * 1000000 ELSE 0 END AS due) k
        GROUP BY queue, k.state, k.due;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO backlog_count (slot, queue, state, due, n)
        SELECT backlog_count_slot(), queue, k.state, k.due, -count(*)
        FROM old_rows,
             LATERAL (SELECT CASE WHEN state = 'available' AND run_at / 1000000 * 1000000 > now_us
                                  THEN (CASE WHEN attempt = 0 THEN 'scheduled' ELSE 'retrying' END)
                                  ELSE state END AS state,
                             CASE WHEN state = 'available' AND run_at / 1000000 * 1000000 > now_us
                                  THEN run_at / 1000000 * 1000000 ELSE 0 END AS due) k
        GROUP BY queue, k.state, k.due;
    ELSE
        INSERT INTO backlog_count (slot, queue, state, due, n)
        SELECT backlog_count_slot(), queue, k.state, k.due, sum(d)
        FROM (SELECT queue, state, run_at, attempt, 1 AS d FROM new_rows
              UNION ALL
              SELECT queue, state, run_at, attempt, -1 FROM old_rows) r,
             LATERAL (SELECT CASE WHEN state = 'available' AND run_at / 1000000 * 1000000 > now_us
                                  THEN (CASE WHEN attempt = 0 THEN 'scheduled' ELSE 'retrying' END)
                                  ELSE state END AS state,
                             CASE WHEN state = 'available' AND run_at / 1000000 * 1000000 > now_us
                                  THEN run_at / 1000000 * 1000000 ELSE 0 END AS due) k
        GROUP BY queue, k.state, k.due
        HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END
$$;

-- The deltas of one statement on backlog_job_done (completed jobs, whatever their state column
-- says) or backlog_job_archive (state key `archived`): the table's key, TG_ARGV[0].
CREATE FUNCTION backlog_job_kept_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO backlog_count (slot, queue, state, due, n)
        SELECT backlog_count_slot(), queue, TG_ARGV[0], 0, count(*) FROM new_rows GROUP BY queue;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO backlog_count (slot, queue, state, due, n)
        SELECT backlog_count_slot(), queue, TG_ARGV[0], 0, -count(*) FROM old_rows GROUP BY queue;
    ELSE
        INSERT INTO backlog_count (slot, queue, state, due, n)
        SELECT backlog_count_slot(), queue, TG_ARGV[0], 0, sum(d)
        FROM (SELECT queue, 1 AS d FROM new_rows UNION ALL SELECT queue, -1 FROM old_rows) r
        GROUP BY queue
        HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END
$$;

-- Writers wait here until the counts below are taken, so that no change is counted twice or
-- missed.
LOCK TABLE backlog_job, backlog_job_done, backlog_job_archive IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER backlog_job_count_insert AFTER INSERT ON backlog_job
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_counted();
CREATE TRIGGER backlog_job_count_update AFTER UPDATE ON backlog_job
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_counted();
CREATE TRIGGER backlog_job_count_delete AFTER DELETE ON backlog_job
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_counted();

CREATE TRIGGER backlog_job_done_count_insert AFTER INSERT ON backlog_job_done
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_kept_counted('completed');
CREATE TRIGGER backlog_job_done_count_update AFTER UPDATE ON backlog_job_done
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_kept_counted('completed');
CREATE TRIGGER backlog_job_done_count_delete AFTER DELETE ON backlog_job_done
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_kept_counted('completed');

CREATE TRIGGER backlog_job_archive_count_insert AFTER INSERT ON backlog_job_archive
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_kept_counted('archived');
CREATE TRIGGER backlog_job_archive_count_update AFTER UPDATE ON backlog_job_archive
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_kept_counted('archived');
CREATE TRIGGER backlog_job_archive_count_delete AFTER DELETE ON backlog_job_archive
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION backlog_job_kept_counted('archived');

-- The jobs already there, counted once (the one scan of the jobs this version makes).
INSERT INTO backlog_count (slot, queue, state, due, n)
SELECT backlog_count_slot(), queue, k.state, k.due, count(*)
FROM backlog_job,
     LATERAL (SELECT CASE WHEN state = 'available'
                               AND run_at / 1000000 * 1000000 > (extract(epoch FROM statement_timestamp()) * 1000000)::bigint
                          THEN (CASE WHEN attempt = 0 THEN 'scheduled' ELSE 'retrying' END)
                          ELSE state END AS state,
                     CASE WHEN state = 'available'
                               AND run_at / 1000000 * 1000000 > (extract(epoch FROM statement_timestamp()) * 1000000)::bigint
                          THEN run_at / 1000000 * 1000000 ELSE 0 END AS due) k
GROUP BY queue, k.state, k.due;
INSERT INTO backlog_count (slot, queue, state, due, n)
SELECT backlog_count_slot(), queue, 'completed', 0, count(*) FROM backlog_job_done GROUP BY queue;
INSERT INTO backlog_count (slot, queue, state, due, n)
SELECT backlog_count_slot(), queue, 'archived', 0, count(*) FROM backlog_job_archive GROUP BY queue;

-- backlog_job_compact() puts back the rows it emptied: not a change to count.
CREATE OR REPLACE FUNCTION backlog_job_compact(max_live BIGINT, lock_wait_ms INTEGER) RETURNS BIGINT
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
        PERFORM set_config('backlog.uncounted', 'on', true);
        INSERT INTO backlog_job SELECT * FROM unnest(kept_rows);
        PERFORM set_config('backlog.uncounted', 'off', true);
    END IF;
    RETURN kept;
END
$$;

-- Folds every slot of backlog_count but the current one into the current one, in the caller's
-- transaction, and returns how many it folded. Each slot is locked ACCESS EXCLUSIVE, waiting at
-- most lock_wait_ms (a writer still in it holds its lock until it commits): a slot whose lock
-- does not come in time is passed over, its rows still counted where they are (a deadlock with
-- a writer whose transaction spans two slots ends the same way, at lock_wait_ms). An available
-- key whose `due` has passed folds into `available`, due 0; keys that sum to 0 are dropped.
CREATE FUNCTION backlog_count_fold(lock_wait_ms INTEGER) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
    cur SMALLINT := backlog_count_slot();
    now_us BIGINT := (extract(epoch FROM statement_timestamp()) * 1000000)::bigint;
    part TEXT;
    folded INTEGER := 0;
    timeout TEXT := current_setting('lock_timeout');
BEGIN
    IF lock_wait_ms IS NULL OR lock_wait_ms < 1 THEN
        RAISE EXCEPTION 'backlog_count_fold: lock_wait_ms must be >= 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR s IN 0..7 LOOP
        part := 'backlog_count_' || s;
        -- An empty slot (no page since its last TRUNCATE) is left alone: a TRUNCATE rewrites
        -- its catalog row, a dead version a held snapshot keeps.
        CONTINUE WHEN s = cur OR pg_relation_size(part::regclass) = 0;
        BEGIN
            PERFORM set_config('lock_timeout', lock_wait_ms || 'ms', true);
            EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', part);
            PERFORM set_config('lock_timeout', timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            PERFORM set_config('lock_timeout', timeout, true);
            CONTINUE;
        END;
        EXECUTE format(
            'INSERT INTO backlog_count (slot, queue, state, due, n) '
            'SELECT $1, queue, k.state, k.due, sum(n) FROM %I, '
            'LATERAL (SELECT CASE WHEN state IN (''scheduled'', ''retrying'') AND due <= $2 '
            '                     THEN ''available'' ELSE state END AS state, '
            '                CASE WHEN state IN (''scheduled'', ''retrying'') AND due <= $2 '
            '                     THEN 0 ELSE due END AS due) k '
            'GROUP BY queue, k.state, k.due HAVING sum(n) <> 0', part)
        USING cur, now_us;
        EXECUTE format('TRUNCATE %I', part);
        folded := folded + 1;
    END LOOP;
    RETURN folded;
END
$$;
