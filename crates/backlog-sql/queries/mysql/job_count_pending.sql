-- One ? per queue (no json_each or arrays in the MySQL/MariaDB common subset).
SELECT COUNT(*) FROM backlog_job
WHERE state IN ('available', 'running') AND queue IN (/*QUEUES*/)
