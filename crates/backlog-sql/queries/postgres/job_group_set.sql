-- Puts just-inserted jobs in their ordered groups: waiting, until group_promote (in the same
-- transaction) makes those whose turn it is available. No claimer saw them available: the
-- insert is not committed yet.
-- @param ids: &[i64]
-- @param groups: Vec<String>
UPDATE backlog_job j SET group_key = t.g, state = 'waiting'
FROM unnest($1::bigint[], $2::text[]) AS t(id, g)
WHERE j.id = t.id
