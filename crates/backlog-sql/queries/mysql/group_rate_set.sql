-- Stores the rate-limit times of ordered groups after a promotion paced their jobs, under
-- group_lock (the rows exist; made here for a caller that had none).
-- @rows ROWS rates: (&str, &str, i64)
INSERT INTO backlog_group (queue, group_key, rate_at) VALUES /*ROWS*/
ON DUPLICATE KEY UPDATE rate_at = VALUES(rate_at)
