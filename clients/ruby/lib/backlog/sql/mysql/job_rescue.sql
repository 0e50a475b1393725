-- Expired leases that job_rescue_ids locked: back to available, or dead when the
-- attempt that died was the last one. errors first (SET runs left to right); the CASE is repeated
-- rather than reading the new state, which MariaDB's SIMULTANEOUS_ASSIGNMENT mode would not see.
-- The WHERE rechecks state and expiry on the locked rows.
-- @param now: i64
-- @list IDS ids: i64
-- @bind now, now, now, ids, now
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?,
             'error', CONCAT('lease expired (worker ', COALESCE(lease_owner, '?'),
                             ' stopped heartbeating)'))),
    state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN ? ELSE NULL END,
    run_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (/*IDS*/) AND state = 'running' AND lease_expires_at < ?
