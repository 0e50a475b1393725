-- The queues as a list (no json_each or arrays in the MySQL/MariaDB common subset); kinds as a
-- JSON array, as the claim takes them (NULL for any); due_by NULL for any time.
-- @list QUEUES queues: &str
-- @param kinds: Option<&str>
-- @param due_by: Option<i64>
-- @bind queues, kinds, kinds, due_by, due_by
SELECT COUNT(*) FROM backlog_job
WHERE state IN ('available', 'running', 'waiting') AND queue IN (/*QUEUES*/)
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND (? IS NULL OR state = 'running' OR run_at <= ?)
