-- Available and running jobs of some queues (`queues`: a JSON array of names), of some kinds
-- (`kinds`: a JSON array, NULL for any), available ones only when due by `due_by` (when not NULL).
-- @param queues: String
-- @param kinds: Option<String>
-- @param due_by: Option<i64>
SELECT COUNT(*) FROM backlog_job
WHERE state IN ('available', 'running', 'waiting') AND queue IN (SELECT value FROM json_each(?1))
  AND (?2 IS NULL OR kind IN (SELECT value FROM json_each(?2)))
  AND (?3 IS NULL OR state = 'running' OR run_at <= ?3)
