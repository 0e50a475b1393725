-- One ? per queue (no json_each or arrays in the MySQL/MariaDB common subset); kinds as a JSON
-- array, as the claim takes them.
SELECT COUNT(*) FROM backlog_job
WHERE state IN ('available', 'running') AND queue IN (/*QUEUES*/)
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND (? IS NULL OR state = 'running' OR run_at <= ?)
