-- backlog schema version 13 (MySQL, MariaDB): the claim index of version 12 gets a name of its
-- own. Version 12 rebuilt backlog_job_claim with the shard after the state; a claim written for
-- version 11 or earlier (no `shard = ?`, and `FORCE INDEX (backlog_job_claim)` as docs/sql.md
-- gave it) then read and locked every available row of its queue to sort them, and in
-- transaction claim mode held them all while its jobs ran. Under the new name such a claim
-- fails at once ("Key 'backlog_job_claim' doesn't exist"), where it would have stopped every
-- other claimer of the queue. Not a name that begins with the old one: MySQL and MariaDB take
-- an unambiguous prefix of an index's name in a hint. A rename: metadata only, no row is
-- touched.
ALTER TABLE backlog_job RENAME INDEX backlog_job_claim TO backlog_job_shard_claim;
