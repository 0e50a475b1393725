-- Version 15: PostgreSQL keeps completed jobs under retention `keep` apart, in backlog_job_done.
-- Here they stay in backlog_job; the view backlog_job_all, every job wherever it is kept, is the
-- same name for a reader in every dialect.
CREATE VIEW backlog_job_all AS SELECT * FROM backlog_job;
