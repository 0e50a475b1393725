INSERT INTO backlog_queue (name, paused, created_at, updated_at) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE paused = VALUES(paused), updated_at = VALUES(updated_at)
