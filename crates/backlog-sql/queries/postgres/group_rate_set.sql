-- Stores the rate-limit times of ordered groups after a promotion paced their jobs, under
-- group_lock (the rows exist; made here for a caller that had none).
-- @param queue: &str
-- @param groups: Vec<String>
-- @param rate_ats: &[i64]
INSERT INTO backlog_group (queue, group_key, rate_at)
SELECT $1, g, at FROM unnest($2::text[], $3::bigint[]) AS t(g, at)
ON CONFLICT (queue, group_key) DO UPDATE SET rate_at = excluded.rate_at
