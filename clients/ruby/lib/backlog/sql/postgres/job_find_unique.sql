-- @param queue: &str
-- @param unique_key: &str
SELECT id FROM backlog_job
WHERE queue = $1 AND unique_key = $2 AND state IN ('available', 'running', 'held', 'waiting')
