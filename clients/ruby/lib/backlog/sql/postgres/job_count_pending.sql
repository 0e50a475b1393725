-- Queue names and kinds come as text arrays; a NULL kinds array means any kind and a NULL $3
-- counts available jobs whenever they are due. The parameters are cast because they may be NULL.
-- @param queues: &[&str]
-- @param kinds: Option<Vec<String>>
-- @param due_by: Option<i64>
SELECT COUNT(*) FROM backlog_job
WHERE state IN ('available', 'running', 'waiting') AND queue = ANY($1::text[])
  AND ($2::text[] IS NULL OR kind = ANY($2::text[]))
  AND ($3::bigint IS NULL OR state = 'running' OR run_at <= $3::bigint)
