-- A failed attempt of a job whose lease token still matches: retried (available at `run_at`),
-- dead or cancelled (finished at `finished_at`), the error appended to its errors.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = ?1, run_at = ?2, finished_at = ?3, lease_token = NULL, lease_expires_at = NULL,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?4, 'error', ?5))
WHERE id = ?6 AND lease_token = ?7 AND state = 'running'
