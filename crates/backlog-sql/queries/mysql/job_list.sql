-- mode: 0 any time, 1 due (run_at <= now), 2 not yet due and never failed (attempt 0), 3 not yet
-- due after a failed attempt.
-- queue, state, kind and unique_key: NULL for any.
-- @param queue: Option<&str>
-- @param state: Option<&str>
-- @param after_id: i64
-- @param mode: i32
-- @param now: i64
-- @param limit: i64
-- @param kind: Option<&str>
-- @param unique_key: Option<&str>
-- Completed jobs are in either the job table (completed before version 17, or in place by a
-- plain-SQL consumer) or a table of the ring (backlog_job_done_0 … _15): each table gives its
-- first rows past the id, in id order (its primary key, read no further than the limit), and the
-- merge keeps the first of those. A filter on another state reads no row of the ring. The ring's
-- sixteen parts are alike but for the table's number.
-- @bind queue, queue, state, state, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, state, state, queue, queue, after_id, mode, mode, now, mode, now, mode, now, kind, kind, unique_key, unique_key, limit, limit
SELECT * FROM (
(SELECT id, queue, kind, state, CAST(payload AS CHAR) AS payload, priority, run_at, attempt,
        max_attempts, lease_token, lease_owner, lease_expires_at, unique_key,
        CAST(errors AS CHAR) AS errors, CAST(result AS CHAR) AS result,
        CAST(progress AS CHAR) AS progress, created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job
 WHERE (? IS NULL OR queue = ?) AND (? IS NULL OR state = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?)
   AND (? IS NULL OR unique_key = ?)
 ORDER BY id
 LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_0
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_1
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_2
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_3
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_4
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_5
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_6
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_7
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_8
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_9
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_10
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_11
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_12
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_13
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_14
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
UNION ALL
(SELECT id, queue, kind, state, CAST(payload AS CHAR), priority, run_at, attempt, max_attempts,
        lease_token, lease_owner, lease_expires_at, unique_key, CAST(errors AS CHAR),
        CAST(result AS CHAR), CAST(progress AS CHAR), created_at, attempted_at, finished_at,
        cancel_requested_at, trace_context, group_key
 FROM backlog_job_done_15
 WHERE (? IS NULL OR ? = 'completed') AND (? IS NULL OR queue = ?) AND id > ?
   AND (? = 0 OR (? = 1 AND run_at <= ?) OR (? = 2 AND run_at > ? AND attempt = 0)
        OR (? = 3 AND run_at > ? AND attempt > 0))
   AND (? IS NULL OR kind = ?) AND (? IS NULL OR unique_key = ?)
 ORDER BY id LIMIT ?)
) AS j
ORDER BY id
LIMIT ?
