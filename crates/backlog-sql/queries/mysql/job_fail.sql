-- errors first: MySQL evaluates SET left to right with the values already assigned.
UPDATE backlog_job
SET errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?, 'error', ?)),
    state = ?, run_at = ?, finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
