-- What job_rescue did to the rows job_rescue_ids locked, read in the same transaction (no RETURNING in MySQL): each job's queue and whether it ended dead.
-- @list IDS ids: i64
SELECT id, queue, state = 'dead' AS dead, has_dependents FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/)
