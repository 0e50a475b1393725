-- Rebuilds the job table online (MariaDB): the rebuild copies the rows its own read view sees,
-- so the delete-marked records an old snapshot keeps from purge are left behind and the
-- tablespace shrinks to the live rows. Writes go on meanwhile (LOCK=NONE); the end waits for
-- the metadata lock at most a second (lock_wait_timeout, whole seconds on MariaDB), holding
-- writers behind it meanwhile. Ids, AUTO_INCREMENT and every column are kept. A snapshot taken
-- before it that reads backlog_job afterwards fails with 1412 ("Table definition has changed").
-- @unprepared
SET STATEMENT lock_wait_timeout = 1 FOR
ALTER TABLE backlog_job FORCE, ALGORITHM = INPLACE, LOCK = NONE
