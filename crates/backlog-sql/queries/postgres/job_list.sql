-- $4: 0 any time, 1 due (run_at <= now), 2 not yet due and never failed (attempt 0), 3 not yet
-- due after a failed attempt.
-- Casts: $1, $2, $7 (the kind) and $8 (the unique key) may be NULL.
-- Completed jobs are in either table (backlog_job_done since version 15; backlog_job for those
-- completed before, or in place by a plain-SQL consumer): each table gives its first rows past
-- the id, and the merge keeps the first of those. A filter on another state reads no row of
-- backlog_job_done: the test on $2 alone is decided once, before the scan.
-- @param queue: Option<&str>
-- @param state: Option<&str>
-- @param after_id: i64
-- @param mode: i32
-- @param now: i64
-- @param limit: i64
-- @param kind: Option<&str>
-- @param unique_key: Option<&str>
SELECT * FROM (
    (SELECT id, queue, kind, state, payload::text AS payload, priority, run_at, attempt,
            max_attempts, lease_token, lease_owner, lease_expires_at, unique_key,
            errors::text AS errors, result::text AS result, progress::text AS progress,
            created_at, attempted_at, finished_at, cancel_requested_at, trace_context, group_key,
            deps_left
     FROM backlog_job
     WHERE ($1::text IS NULL OR queue = $1::text) AND ($2::text IS NULL OR state = $2::text)
       AND id > $3
       AND ($4 = 0 OR ($4 = 1 AND run_at <= $5) OR ($4 = 2 AND run_at > $5 AND attempt = 0)
            OR ($4 = 3 AND run_at > $5 AND attempt > 0))
       AND ($7::text IS NULL OR kind = $7::text)
       AND ($8::text IS NULL OR unique_key = $8::text)
     ORDER BY id
     LIMIT $6)
    UNION ALL
    (SELECT id, queue, kind, state, payload::text, priority, run_at, attempt, max_attempts,
            lease_token, lease_owner, lease_expires_at, unique_key, errors::text, result::text,
            progress::text, created_at, attempted_at, finished_at, cancel_requested_at,
            trace_context, group_key, 0
     FROM backlog_job_done
     WHERE ($2::text IS NULL OR $2::text = 'completed') AND ($1::text IS NULL OR queue = $1::text)
       AND id > $3
       AND ($4 = 0 OR ($4 = 1 AND run_at <= $5) OR ($4 = 2 AND run_at > $5 AND attempt = 0)
            OR ($4 = 3 AND run_at > $5 AND attempt > 0))
       AND ($7::text IS NULL OR kind = $7::text)
       AND ($8::text IS NULL OR unique_key = $8::text)
     ORDER BY id
     LIMIT $6)
) AS j
ORDER BY id
LIMIT $6
