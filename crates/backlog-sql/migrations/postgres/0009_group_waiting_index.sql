-- backlog schema version 9 (PostgreSQL): nothing changes. SQLite gains partial indexes of the
-- jobs waiting and active in ordered groups at this version; here backlog_job_group (version 7)
-- already holds only waiting, available and running jobs, so a group's next job and its count
-- of active jobs never walk its finished rows. Versions stay the same on every dialect.
SELECT 1;
