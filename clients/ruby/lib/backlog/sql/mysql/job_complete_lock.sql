-- No RETURNING in MySQL: lock the rows first to learn which hold the caller's token. FORCE INDEX:
-- on a small table the optimizer scans instead, locking rows other workers hold (deadlocks).
-- @list IDS ids: i64
SELECT id, lease_token, state, has_dependents FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/) FOR UPDATE
