-- Empties one table of the ring whole, at once or not at all (NOWAIT: a session that read it in
-- an open transaction holds its metadata lock; the leader tries again at its next pass instead
-- of queueing everyone behind it). MariaDB; MySQL 8 has no NOWAIT here (job_done_empty_wait).
-- @unprepared
-- @table SLOT slot
TRUNCATE TABLE backlog_job_done_/*SLOT*/ NOWAIT
