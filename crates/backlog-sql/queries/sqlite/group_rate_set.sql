-- Stores the rate-limit times of ordered groups after a promotion paced their jobs, in its
-- write transaction. `rates`: a JSON array of [group_key, rate_at] pairs. (`WHERE true`: an
-- upsert from a SELECT needs it, or ON reads as a join's.)
-- @param queue: &str
-- @param rates: &str
INSERT INTO backlog_group (queue, group_key, rate_at)
SELECT ?1, r.value ->> 0, r.value ->> 1 FROM json_each(?2) AS r WHERE true
ON CONFLICT (queue, group_key) DO UPDATE SET rate_at = excluded.rate_at
