-- Wakes the workers of these queues (one notification each, delivered at commit).
-- @param queues: &[&str]
SELECT pg_notify('backlog_job', q) FROM UNNEST($1::text[]) AS t(q)
