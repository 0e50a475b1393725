-- A no-op update rather than INSERT IGNORE, which would also swallow other errors.
INSERT INTO backlog_queue (name, created_at, updated_at) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE name = name
