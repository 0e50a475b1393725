-- The edges of new jobs to their parents. `edges`: a JSON array of [parent, child, policy].
-- @param edges: &str
INSERT INTO backlog_job_dep (parent_id, child_id, policy)
SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?1)
