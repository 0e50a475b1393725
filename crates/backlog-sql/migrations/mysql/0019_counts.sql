-- backlog schema version 19 (MySQL 8 / MariaDB 10.6+): per-queue, per-state counts kept by the
-- database, so that stats, the queue list and /metrics read O(queues) rows instead of every job.
-- DDL commits statement by statement here, so each statement stands alone (a trigger's body,
-- BEGIN … END, is one statement: it ends at the line `END;`).
--
-- Row triggers on backlog_job, the completed jobs' ring and backlog_job_archive add each change
-- to backlog_count, in the changing statement's own transaction (a rollback or a crash takes it
-- back): the runtime's statements, an operator's, and a plain-SQL client's alike. A count is the
-- sum of its key's rows.
--
-- Each connection writes rows of its own, `shard` = the connection's id beside a hash of the
-- server's host and port (a Galera node's writers never touch another node's rows), so that no
-- two transactions wait on a counter row or deadlock on one. InnoDB updates a counter row in
-- place: a held snapshot costs it undo records, not rows. The leader folds rows that no
-- transaction holds (SKIP LOCKED) into shard 0 now and then, and an available key whose `due`
-- has passed into `available`, due 0 (backlog_count_fold.sql).
--
-- The state key is the stored state, but for an available job not yet due: `scheduled` (never
-- attempted) or `retrying`, with `due` its run_at cut to the second. A reader counts such a key
-- as available once `due` has passed; the writers classify with the same rule, so whichever
-- time a job was inserted and moved at, its changes cancel out. Completed jobs in the ring count
-- under `completed` with `due` the ring table's number (an emptied table's rows are dropped with
-- it, backlog_count_done_drop.sql); archived jobs under `archived`; every other key has due 0.
CREATE TABLE backlog_count (
    shard BIGINT NOT NULL,
    queue VARCHAR(128) NOT NULL,
    state VARCHAR(16) NOT NULL,
    due   BIGINT NOT NULL,
    n     BIGINT NOT NULL,
    PRIMARY KEY (shard, queue, state, due)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;


-- backlog_job: each row's key, +1 new and -1 old.

CREATE TRIGGER backlog_job_count_insert AFTER INSERT ON backlog_job FOR EACH ROW
BEGIN
    DECLARE now_us BIGINT DEFAULT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED);
    INSERT INTO backlog_count (shard, queue, state, due, n)
    VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue,
            IF(NEW.state = 'available' AND NEW.run_at DIV 1000000 * 1000000 > now_us, IF(NEW.attempt = 0, 'scheduled', 'retrying'), NEW.state),
            IF(NEW.state = 'available' AND NEW.run_at DIV 1000000 * 1000000 > now_us, NEW.run_at DIV 1000000 * 1000000, 0), 1)
    ON DUPLICATE KEY UPDATE n = n + 1;
END;

CREATE TRIGGER backlog_job_count_update AFTER UPDATE ON backlog_job FOR EACH ROW
BEGIN
    DECLARE now_us BIGINT DEFAULT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED);
    DECLARE old_state VARCHAR(16) DEFAULT IF(OLD.state = 'available' AND OLD.run_at DIV 1000000 * 1000000 > now_us, IF(OLD.attempt = 0, 'scheduled', 'retrying'), OLD.state);
    DECLARE new_state VARCHAR(16) DEFAULT IF(NEW.state = 'available' AND NEW.run_at DIV 1000000 * 1000000 > now_us, IF(NEW.attempt = 0, 'scheduled', 'retrying'), NEW.state);
    DECLARE old_due BIGINT DEFAULT IF(OLD.state = 'available' AND OLD.run_at DIV 1000000 * 1000000 > now_us, OLD.run_at DIV 1000000 * 1000000, 0);
    DECLARE new_due BIGINT DEFAULT IF(NEW.state = 'available' AND NEW.run_at DIV 1000000 * 1000000 > now_us, NEW.run_at DIV 1000000 * 1000000, 0);
    -- A heartbeat, a progress report, a lease renewal: the key did not change.
    IF OLD.queue <> NEW.queue OR old_state <> new_state OR old_due <> new_due THEN
        INSERT INTO backlog_count (shard, queue, state, due, n)
        VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, old_state, old_due, -1),
               (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, new_state, new_due, 1)
        ON DUPLICATE KEY UPDATE n = n + VALUES(n);
    END IF;
END;

CREATE TRIGGER backlog_job_count_delete AFTER DELETE ON backlog_job FOR EACH ROW
BEGIN
    DECLARE now_us BIGINT DEFAULT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED);
    INSERT INTO backlog_count (shard, queue, state, due, n)
    VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue,
            IF(OLD.state = 'available' AND OLD.run_at DIV 1000000 * 1000000 > now_us, IF(OLD.attempt = 0, 'scheduled', 'retrying'), OLD.state),
            IF(OLD.state = 'available' AND OLD.run_at DIV 1000000 * 1000000 > now_us, OLD.run_at DIV 1000000 * 1000000, 0), -1)
    ON DUPLICATE KEY UPDATE n = n - 1;
END;

-- The completed jobs' ring: each table's jobs under `completed`, due = its number.

CREATE TRIGGER backlog_job_done_0_count_insert AFTER INSERT ON backlog_job_done_0 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 0, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_0_count_delete AFTER DELETE ON backlog_job_done_0 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 0, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_0_count_update AFTER UPDATE ON backlog_job_done_0 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 0, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_1_count_insert AFTER INSERT ON backlog_job_done_1 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 1, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_1_count_delete AFTER DELETE ON backlog_job_done_1 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 1, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_1_count_update AFTER UPDATE ON backlog_job_done_1 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 1, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_2_count_insert AFTER INSERT ON backlog_job_done_2 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 2, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_2_count_delete AFTER DELETE ON backlog_job_done_2 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 2, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_2_count_update AFTER UPDATE ON backlog_job_done_2 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 2, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_3_count_insert AFTER INSERT ON backlog_job_done_3 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 3, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_3_count_delete AFTER DELETE ON backlog_job_done_3 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 3, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_3_count_update AFTER UPDATE ON backlog_job_done_3 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 3, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_4_count_insert AFTER INSERT ON backlog_job_done_4 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 4, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_4_count_delete AFTER DELETE ON backlog_job_done_4 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 4, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_4_count_update AFTER UPDATE ON backlog_job_done_4 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 4, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_5_count_insert AFTER INSERT ON backlog_job_done_5 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 5, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_5_count_delete AFTER DELETE ON backlog_job_done_5 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 5, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_5_count_update AFTER UPDATE ON backlog_job_done_5 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 5, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_6_count_insert AFTER INSERT ON backlog_job_done_6 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 6, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_6_count_delete AFTER DELETE ON backlog_job_done_6 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 6, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_6_count_update AFTER UPDATE ON backlog_job_done_6 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 6, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_7_count_insert AFTER INSERT ON backlog_job_done_7 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 7, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_7_count_delete AFTER DELETE ON backlog_job_done_7 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 7, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_7_count_update AFTER UPDATE ON backlog_job_done_7 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 7, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_8_count_insert AFTER INSERT ON backlog_job_done_8 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 8, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_8_count_delete AFTER DELETE ON backlog_job_done_8 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 8, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_8_count_update AFTER UPDATE ON backlog_job_done_8 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 8, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_9_count_insert AFTER INSERT ON backlog_job_done_9 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 9, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_9_count_delete AFTER DELETE ON backlog_job_done_9 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 9, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_9_count_update AFTER UPDATE ON backlog_job_done_9 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 9, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_10_count_insert AFTER INSERT ON backlog_job_done_10 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 10, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_10_count_delete AFTER DELETE ON backlog_job_done_10 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 10, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_10_count_update AFTER UPDATE ON backlog_job_done_10 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 10, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_11_count_insert AFTER INSERT ON backlog_job_done_11 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 11, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_11_count_delete AFTER DELETE ON backlog_job_done_11 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 11, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_11_count_update AFTER UPDATE ON backlog_job_done_11 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 11, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_12_count_insert AFTER INSERT ON backlog_job_done_12 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 12, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_12_count_delete AFTER DELETE ON backlog_job_done_12 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 12, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_12_count_update AFTER UPDATE ON backlog_job_done_12 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 12, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_13_count_insert AFTER INSERT ON backlog_job_done_13 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 13, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_13_count_delete AFTER DELETE ON backlog_job_done_13 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 13, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_13_count_update AFTER UPDATE ON backlog_job_done_13 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 13, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_14_count_insert AFTER INSERT ON backlog_job_done_14 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 14, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_14_count_delete AFTER DELETE ON backlog_job_done_14 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 14, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_14_count_update AFTER UPDATE ON backlog_job_done_14 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 14, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

CREATE TRIGGER backlog_job_done_15_count_insert AFTER INSERT ON backlog_job_done_15 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'completed', 15, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_done_15_count_delete AFTER DELETE ON backlog_job_done_15 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'completed', 15, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_done_15_count_update AFTER UPDATE ON backlog_job_done_15 FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'completed', 15, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

-- Archived jobs, whatever state they finished in.

CREATE TRIGGER backlog_job_archive_count_insert AFTER INSERT ON backlog_job_archive FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), NEW.queue, 'archived', 0, +1)
ON DUPLICATE KEY UPDATE n = n + 1;

CREATE TRIGGER backlog_job_archive_count_delete AFTER DELETE ON backlog_job_archive FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
VALUES (((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), OLD.queue, 'archived', 0, -1)
ON DUPLICATE KEY UPDATE n = n - 1;

CREATE TRIGGER backlog_job_archive_count_update AFTER UPDATE ON backlog_job_archive FOR EACH ROW
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT ((CRC32(CONCAT(@@hostname, ':', @@port)) & 2147483647) << 32) | CONNECTION_ID(), k.queue, 'archived', 0, k.n
FROM (SELECT OLD.queue AS queue, -1 AS n UNION ALL SELECT NEW.queue, 1) k
WHERE OLD.queue <> NEW.queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

-- The jobs already there, counted once (the one scan of the jobs this version makes). A job
-- written between a trigger's creation and this count would be counted twice: the migration
-- runs before the workers of this version start, and a worker of an older version refuses a
-- newer schema.

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, k_state, k_due, COUNT(*)
FROM (SELECT queue,
             IF(state = 'available' AND run_at DIV 1000000 * 1000000 > CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED),
                IF(attempt = 0, 'scheduled', 'retrying'), state) AS k_state,
             IF(state = 'available' AND run_at DIV 1000000 * 1000000 > CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED),
                run_at DIV 1000000 * 1000000, 0) AS k_due
      FROM backlog_job) j
GROUP BY queue, k_state, k_due
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 0, COUNT(*) FROM backlog_job_done_0 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 1, COUNT(*) FROM backlog_job_done_1 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 2, COUNT(*) FROM backlog_job_done_2 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 3, COUNT(*) FROM backlog_job_done_3 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 4, COUNT(*) FROM backlog_job_done_4 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 5, COUNT(*) FROM backlog_job_done_5 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 6, COUNT(*) FROM backlog_job_done_6 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 7, COUNT(*) FROM backlog_job_done_7 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 8, COUNT(*) FROM backlog_job_done_8 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 9, COUNT(*) FROM backlog_job_done_9 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 10, COUNT(*) FROM backlog_job_done_10 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 11, COUNT(*) FROM backlog_job_done_11 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 12, COUNT(*) FROM backlog_job_done_12 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 13, COUNT(*) FROM backlog_job_done_13 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 14, COUNT(*) FROM backlog_job_done_14 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'completed', 15, COUNT(*) FROM backlog_job_done_15 GROUP BY queue;

INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, queue, 'archived', 0, COUNT(*) FROM backlog_job_archive GROUP BY queue
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n);
