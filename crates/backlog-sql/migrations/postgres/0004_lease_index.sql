-- The lease index holds the rows that have a lease: `lease_expires_at` is set by every claim and
-- cleared by every way out of `running`, so these are the running rows, as before. The predicate
-- was `state = 'running'`, which every fenced statement (`… AND state = 'running'`) implies, so
-- the planner could add a bitmap scan of the whole index to a completion of 50 ids by primary
-- key. A bitmap scan never marks an index entry dead, and every claim adds one, so during a long
-- drain each completion read more of them: measured, 85,000 entries and 1.9 ms of a 2.7 ms
-- completion near the end of a 100,000-job drain, with the statistics of a freshly vacuumed
-- table. Rescue (`lease_expires_at < now`) and the claim-token read-back (`lease_expires_at = …`)
-- imply the new predicate and still use the index; a completion by id cannot.
DROP INDEX backlog_job_lease;
CREATE INDEX backlog_job_lease ON backlog_job (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
