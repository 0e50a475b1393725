-- Clears job_insert's marker before the transaction commits, on the ids job_insert_created
-- found: an open range would take next-key locks up to the end of the table in a
-- caller's REPEATABLE READ transaction, blocking every other producer until it commits.
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY) SET lease_token = NULL WHERE id IN (/*IDS*/)
