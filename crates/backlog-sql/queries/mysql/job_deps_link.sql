-- The edges of new jobs to their parents: (parent, child, policy).
-- @rows ROWS edges: (i64, i64, &str)
INSERT INTO backlog_job_dep (parent_id, child_id, policy) VALUES /*ROWS*/
