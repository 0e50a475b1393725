-- Version 14 adds PostgreSQL's backlog_job_compact(), which empties the job table's dead rows
-- that another session's snapshot keeps. Recorded here too so that a version number means the
-- same contract in every dialect.
SELECT 1;
