-- @param to: &str
-- @param run_at: Option<i64>
-- @param reset_attempts: bool
-- @param finished_at: Option<i64>
-- @param id: i64
-- @param from_a: &str
-- @param from_b: &str
-- @param from_c: &str
UPDATE backlog_job
SET state = ?, run_at = COALESCE(?, run_at), attempt = CASE WHEN ? THEN 0 ELSE attempt END,
    finished_at = ?
WHERE id = ? AND state IN (?, ?, ?)
