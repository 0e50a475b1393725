-- The lease index holds the rows that have a lease (the running rows, as before), with the same
-- predicate as on PostgreSQL, where `state = 'running'` let a completion by id scan the whole
-- index. Rescue and the claim-token read-back compare `lease_expires_at` and so still use it.
DROP INDEX backlog_job_lease;
CREATE INDEX backlog_job_lease ON backlog_job (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
