UPDATE backlog_job
SET progress = COALESCE(?, progress), result = COALESCE(?, result)
WHERE id = ? AND lease_token = ? AND state = 'running'
