-- Stores a rate-limited queue's token bucket after a claim took its tokens: the level left and
-- the time it was computed for. Run under queue_lock, in the claim's transaction.
-- @param tokens: f64
-- @param at: i64
-- @param queue: &str
UPDATE backlog_queue SET rate_tokens = ?, rate_at = ? WHERE name = ?
