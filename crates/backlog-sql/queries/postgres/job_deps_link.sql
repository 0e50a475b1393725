-- The edges of new jobs to their parents: (parent, child, policy).
-- @param parents: &[i64]
-- @param children: &[i64]
-- @param policies: Vec<String>
INSERT INTO backlog_job_dep (parent_id, child_id, policy)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[])
