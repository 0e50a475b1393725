-- Rows of workers whose registration expired before `before` (they stopped without saying so).
-- @param before: i64
DELETE FROM backlog_worker WHERE expires_at < ?1
