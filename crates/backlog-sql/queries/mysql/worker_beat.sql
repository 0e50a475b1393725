-- A running worker's row, written at its start and every beat (docs/sql.md, "Workers").
-- @param id: &str
-- @param host: &str
-- @param pid: i64
-- @param version: &str
-- @param queues: &str
-- @param running: i64
-- @param started_at: i64
-- @param seen_at: i64
-- @param expires_at: i64
INSERT INTO backlog_worker (id, host, pid, version, queues, running, started_at, seen_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    queues = VALUES(queues),
    running = VALUES(running),
    seen_at = VALUES(seen_at),
    expires_at = VALUES(expires_at)
