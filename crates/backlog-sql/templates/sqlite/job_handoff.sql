-- @name job_handoff
-- Hands the turns of a worker's finished jobs in their ordered groups straight to each group's
-- next job, claimed under the worker's new lease: one move (waiting to running) where a
-- promotion and then a claim make two. Run in the transaction that completes the finished jobs,
-- before the completion: they must still be running under the caller's tokens. A group's count
-- of active jobs does not change (one leaves, one starts). Not in a paused queue, nor in one
-- with a rate limit, its own or its groups' (each start is counted): those promote as usual.
-- The next job is the group's first due waiting job in enqueue order; when it is of a kind the
-- caller does not run, nothing is handed over and the group is promoted as usual.
-- `pairs`: the finished jobs' (id, lease_token) pairs as a JSON array of two-element arrays,
-- each looked up by primary key: CROSS JOIN keeps that join order (without it, the planner scanned
-- the queue's whole group index for the finished jobs, 4.5 ms a call on 5,000 grouped jobs).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
-- @param pairs: &str
WITH turns AS MATERIALIZED (
    -- Materialized: the next job's look-up runs once per finished job, not again for the filter.
    SELECT DISTINCT (SELECT w.id FROM backlog_job AS w
                     WHERE w.queue = ?5 AND w.group_key = b.group_key AND w.state = 'waiting'
                       AND w.run_at <= ?4
                     ORDER BY w.id LIMIT 1) AS next
    FROM json_each(?8) AS p
    CROSS JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running' AND b.queue = ?5
      AND b.group_key IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ?5 AND (paused = 1 OR rate_limit IS NOT NULL
                                                                OR group_rate_limit IS NOT NULL))
)
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ?1, lease_owner = ?2,
    lease_expires_at = ?3, attempted_at = ?4
WHERE id IN (SELECT next FROM turns WHERE next IS NOT NULL ORDER BY next LIMIT +?7)
  AND state = 'waiting' AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
RETURNING
    -- @include claim_columns
