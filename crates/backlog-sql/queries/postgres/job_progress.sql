-- Casts: either may be NULL (keep what is stored), and text becomes JSONB here.
-- @param progress: Option<String>
-- @param result: Option<String>
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET progress = COALESCE($1::text::jsonb, progress), result = COALESCE($2::text::jsonb, result)
WHERE id = $3 AND lease_token = $4 AND state = 'running'
