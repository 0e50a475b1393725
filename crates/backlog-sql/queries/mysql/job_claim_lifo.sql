-- SKIP LOCKED: concurrent claimers pass over each other's rows; job_claim_update takes these in
-- the same transaction (no UPDATE … RETURNING in MySQL), so the SELECT returns what it will write.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: the claim index whatever the statistics say (a
-- scan would lock far more rows). Not the queue, token or lease expiry: the claimer chose them. By
-- priority, then the newest due first (LIFO).
-- Two steps in one statement, so that a held snapshot costs nothing: the derived table `c` reads
-- the shard's next `candidates` keys from the claim index as a plain (consistent) read, then
-- the rows are locked by primary key in that order, rechecked, and the first `limit` taken.
-- A locking read of the claim index itself checks each delete-marked entry (every job claimed
-- since purge last ran) for an implicit lock: with another session's snapshot held 3 minutes
-- at 2,000 jobs/s, 422,485 pages for one claim of 3 jobs, against 1,321 + 9 this way
-- (docs/bench-journal/2026-11-28-mariadb-locking-read.md). STRAIGHT_JOIN and the order by
-- `c`'s columns: the candidates are sorted first and joined in that order, so the LIMIT stops
-- the locking there instead of locking every candidate before a sort.
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @param candidates: i64
-- @bind queue, shard, now, kinds, kinds, queue, candidates, now, limit
SELECT j.id, j.kind, CAST(j.payload AS CHAR) AS payload, j.priority, j.attempt + 1 AS attempt,
       j.max_attempts, j.run_at, j.created_at, j.trace_context, j.group_key
FROM (
    SELECT priority, run_at, id FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
    WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
      AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR global_concurrency IS NOT NULL
                                                                      OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at DESC, id DESC
    LIMIT ?
) AS c
STRAIGHT_JOIN backlog_job AS j FORCE INDEX (PRIMARY) ON j.id = c.id
WHERE j.state = 'available' AND j.run_at <= ?
ORDER BY c.priority, c.run_at DESC, c.id DESC
LIMIT ?
FOR UPDATE SKIP LOCKED
