-- errors first: MySQL evaluates SET left to right with the values already assigned.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- @bind now, error, state, state, run_at, finished_at, id, token
-- A failed job of an ordered group whose queue lets the group go on (group_on_failure 'next')
-- waits for its group's turn again instead of holding its group's place while it waits to retry.
UPDATE backlog_job
SET errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?, 'error', ?)),
    state = CASE WHEN ? = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = queue) = 'next'
             THEN 'waiting' ELSE ? END,
    run_at = ?, finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
