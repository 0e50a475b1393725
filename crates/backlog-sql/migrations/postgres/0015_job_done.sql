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
