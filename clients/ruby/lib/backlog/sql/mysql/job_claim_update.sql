-- The rows job_claim locked in this transaction. FORCE INDEX: on a small table the
-- optimizer scans instead, waiting on rows other workers hold.
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = 'running', attempt = attempt + 1, lease_token = ?, lease_owner = ?,
    lease_expires_at = ?, attempted_at = ?
WHERE id IN (/*IDS*/)
