-- @generated from templates/mysql/job_claim.sql by tests/templates.rs: edit the template
-- job_claim_limited_fifo's claim in two steps, which the claimer uses while purge is behind (a
-- snapshot held by another session, or purge lagging under load; see ClaimShape in mysql.rs): the
-- derived table `c` reads the shard's next `candidates` keys from the claim index as a plain
-- (consistent) read, then the rows are locked by primary key in that order, rechecked, and the
-- first `limit` taken. A locking read of the claim index itself pays, for every entry it steps on,
-- a check for an implicit lock that grows with the history purge has not removed: with a snapshot
-- held 3 minutes at 2,000 jobs/s, 422,485 pages for one claim of 3 jobs, against 1,321 + 9 this
-- way (docs/bench-journal/2026-11-28-mariadb-locking-read.md). On a purged index this form is
-- slower (a temporary table and a sort: a drain about 20% slower), hence two forms. STRAIGHT_JOIN
-- and the order by `c`'s columns: the candidates are sorted first and joined in that order, so the
-- LIMIT stops the locking instead of locking every candidate before a sort.
-- Not the paused check: queue_lock read it under the lock.
-- After: the shard's claim cursor (src/cursor.rs), the key `(priority, run_at, id)` past
-- which it starts, past the delete-marked entries a held snapshot keeps purge from
-- removing; NULL: from the head (a full pass). Written out with OR, which the range
-- optimizer reads as ranges of the claim index.
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @param candidates: i64
-- @param after_priority: Option<i16>
-- @param after_run_at: Option<i64>
-- @param after_id: Option<i64>
-- @bind queue, shard, now, kinds, kinds, after_priority, after_priority, after_priority, after_run_at, after_run_at, after_id, candidates, now, limit
SELECT
    j.id, j.kind, CAST(j.payload AS CHAR) AS payload, j.priority, j.attempt + 1 AS attempt,
    j.max_attempts, j.run_at, j.created_at, j.trace_context, j.group_key
FROM (
    SELECT priority, run_at, id FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
    WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
      AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
      AND (? IS NULL OR priority > ? OR (priority = ? AND (run_at > ? OR (run_at = ? AND id > ?))))
    ORDER BY priority, run_at, id
    LIMIT ?
) AS c
STRAIGHT_JOIN backlog_job AS j FORCE INDEX (PRIMARY) ON j.id = c.id
WHERE j.state = 'available' AND j.run_at <= ?
ORDER BY c.priority, c.run_at, c.id
LIMIT ?
FOR UPDATE SKIP LOCKED
