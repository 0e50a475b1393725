-- A failed attempt of a job whose lease token still matches: retried (available at `run_at`),
-- dead or cancelled (finished at `finished_at`), the error appended to its errors.
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
SET state = CASE WHEN ?1 = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = backlog_job.queue) = 'next'
             THEN 'waiting' ELSE ?1 END,
    run_at = ?2, finished_at = ?3, lease_token = NULL, lease_expires_at = NULL,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?4, 'error', ?5))
WHERE id = ?6 AND lease_token = ?7 AND state = 'running'
