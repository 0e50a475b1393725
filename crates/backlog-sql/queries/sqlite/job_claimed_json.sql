-- The jobs a claim marked (job_claim_token_*), as one row: a JSON array with, for each job,
-- [id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context,
-- group_key] (the payload and trace context as strings), in no particular order. One row, not a
-- row per job: the SQLite driver runs the connection on a thread of its own and hands each row
-- of a result over to the caller on its own, a wake-up of the caller's thread per row, which
-- cost more than the claim itself (docs/explain.md, "SQLite: a claim read back in one row").
-- All rows of one claim share its expiry, so the lease index finds them.
-- @param expires: i64
-- @param token: i64
SELECT json_group_array(json_array(id, kind, payload, priority, attempt, max_attempts, run_at,
                                   created_at, trace_context, group_key))
FROM backlog_job
WHERE state = 'running' AND lease_expires_at = ?1 AND lease_token = ?2
