UPDATE backlog_job
SET state = ?1, run_at = ?2, finished_at = ?3, lease_token = NULL, lease_expires_at = NULL,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?4, 'error', ?5))
WHERE id = ?6 AND lease_token = ?7 AND state = 'running'
