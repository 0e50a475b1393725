-- @name job_claim_{mode}{order}
-- @axis mode: plain=, limited=limited_, twostep=twostep_, limited_twostep=limited_twostep_, token=token_
-- @axis order: fifo, lifo
-- @if mode=plain
-- SKIP LOCKED: concurrent claimers pass over each other's rows; job_claim_update takes these in
-- the same transaction (no UPDATE … RETURNING in MySQL), so the SELECT returns what it will write.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: the claim index whatever the statistics say (a
-- scan would lock far more rows). Not the queue, token or lease expiry: the claimer chose them.
-- @if order=fifo
-- By priority, then the oldest due first (FIFO).
-- @else
-- By priority, then the newest due first (LIFO).
-- @end
-- @elif mode=limited
-- @if order=fifo
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (FIFO), in the
-- @else
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (LIFO), in the
-- @end
-- transaction that holds the queue row's lock (queue_lock) and has counted its running jobs
-- (queue_running): `limit` is what the limit leaves. Not the paused check of job_claim_{{order}}:
-- queue_lock read it under the lock. job_claim_update takes the rows in the same transaction.
-- One shard per statement, as in job_claim_fifo.
-- @elif mode=twostep|limited_twostep
-- @if mode=twostep
-- job_claim_{{order}}'s claim in two steps, which the claimer uses while purge is behind (a
-- @else
-- job_claim_limited_{{order}}'s claim in two steps, which the claimer uses while purge is behind (a
-- @end
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
-- @if mode=limited_twostep
-- Not the paused check: queue_lock read it under the lock.
-- @end
-- @else
-- Claim-token strategy (seeds S3, S5): UPDATE … ORDER BY … LIMIT marks rows with a fresh token
-- (MySQL allows ORDER BY and LIMIT on a single-table UPDATE); job_select_token reads them back.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: every claimer locks rows in claim-index order, so
-- they queue instead of deadlocking.
-- @if order=fifo
-- By priority, then the oldest due first (FIFO).
-- @else
-- By priority, then the newest due first (LIFO).
-- @end
-- @end
-- @if order=fifo mode!=token
-- @include cursor_doc
-- @end
-- @if mode=token
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param shard: i32
-- @param kinds: Option<&str>
-- @param limit: i64
-- @else
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @end
-- @if mode=twostep|limited_twostep
-- @param candidates: i64
-- @end
-- @if order=fifo mode!=token
-- @param after_priority: Option<i16>
-- @param after_run_at: Option<i64>
-- @param after_id: Option<i64>
-- @end
-- @if mode=plain|limited
SELECT
    -- @include claim_columns p= next=yes
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
-- @include claim_where
LIMIT ${limit}
FOR UPDATE SKIP LOCKED
-- @elif mode=token
UPDATE backlog_job FORCE INDEX (backlog_job_shard_claim)
SET state = 'running', attempt = attempt + 1, lease_token = ${token}, lease_owner = ${owner},
    lease_expires_at = ${expires}, attempted_at = ${now}
-- @include claim_where
LIMIT ${limit}
-- @else
SELECT
    -- @include claim_columns p=j. next=yes
FROM (
    SELECT priority, run_at, id FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
    -- @include claim_where
    LIMIT ${candidates}
) AS c
STRAIGHT_JOIN backlog_job AS j FORCE INDEX (PRIMARY) ON j.id = c.id
WHERE j.state = 'available' AND j.run_at <= ${now}
-- @if order=fifo
ORDER BY c.priority, c.run_at, c.id
-- @else
ORDER BY c.priority, c.run_at DESC, c.id DESC
-- @end
LIMIT ${limit}
FOR UPDATE SKIP LOCKED
-- @end
