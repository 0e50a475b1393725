UPDATE backlog_job SET cancel_requested_at = ? WHERE id = ? AND state = 'running'
