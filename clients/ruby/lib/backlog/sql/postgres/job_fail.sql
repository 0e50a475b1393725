-- Casts: $3 may be NULL, and jsonb_build_object takes "any" so its arguments need a type.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- A failed job of an ordered group whose queue lets the group go on (group_on_failure 'next')
-- waits for its group's turn again instead of holding its group's place while it waits to retry.
UPDATE backlog_job
SET state = CASE WHEN $1 = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = queue) = 'next'
             THEN 'waiting' ELSE $1 END,
    run_at = $2, finished_at = $3::bigint, lease_token = NULL, lease_expires_at = NULL,
    errors = errors || jsonb_build_array(
        jsonb_build_object('attempt', attempt, 'at', $4::bigint, 'error', $5::text))
WHERE id = $6 AND lease_token = $7 AND state = 'running'
