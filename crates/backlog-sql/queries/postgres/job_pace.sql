-- Holds back jobs just promoted in groups whose rate limit does not let them start yet: each
-- stays available, due when the limit lets it start.
-- @param ids: &[i64]
-- @param run_ats: &[i64]
UPDATE backlog_job j SET run_at = p.run_at
FROM unnest($1::bigint[], $2::bigint[]) AS p(id, run_at)
WHERE j.id = p.id AND j.state = 'available'
