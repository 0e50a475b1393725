-- Version 16 keeps PostgreSQL's completed jobs (backlog_job_done) in a ring of partitions that
-- the leader empties whole. Recorded here too so that a version number means the same contract
-- in every dialect.
SELECT 1;
