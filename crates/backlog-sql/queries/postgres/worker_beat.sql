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
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9)
ON CONFLICT (id) DO UPDATE SET
    queues = excluded.queues,
    running = excluded.running,
    seen_at = excluded.seen_at,
    expires_at = excluded.expires_at
