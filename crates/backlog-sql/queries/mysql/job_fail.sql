-- errors first: MySQL evaluates SET left to right with the values already assigned.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- @bind now, error, state, run_at, finished_at, id, token
UPDATE backlog_job
SET errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?, 'error', ?)),
    state = ?, run_at = ?, finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
