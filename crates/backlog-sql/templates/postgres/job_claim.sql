-- @name job_claim_{mode}{order}
-- @axis mode: plain=, limited=limited_, locked=locked_, token=token_
-- @axis order: fifo, lifo
-- @if mode=plain
-- @if order=fifo
-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- The queue's jobs lie on `shards` claim heads (backlog_queue.shards; 1: one strict head). The
-- claim starts at a random shard and takes each shard's head in turn, in the order above,
-- until it has `limit` jobs: one index probe per shard it visits (the LATERAL subquery), so
-- it costs O(limit + shards) whatever the statistics. The count and the first shard are read
-- once into a MATERIALIZED CTE: inlined, random() would be folded into the probe and run again
-- at each shard. The shards come from a constant series cut to the count (one per possible
-- shard, 256): a series bounded by the count itself made PostgreSQL 15 spend about 10 ms on
-- every claim (against 0.15 ms) once the subquery holds FOR UPDATE.
-- @else
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- @end
-- @elif mode=limited
-- @if order=fifo
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (FIFO), in the
-- @else
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (LIFO), in the
-- @end
-- transaction that holds the queue row's lock (queue_lock) and has counted its running jobs
-- (queue_running): `limit` is what the limit leaves. Not the paused check of job_claim_{{order}}:
-- queue_lock read it under the lock.
-- @elif mode=locked
-- @if order=fifo
-- Claims up to `limit` due jobs of a queue in transaction claim mode, FIFO: by priority, then due
-- time, then id.
-- @else
-- Claims up to `limit` due jobs of a queue in transaction claim mode, LIFO: by priority, then latest
-- due time first.
-- @end
-- It locks the rows (FOR UPDATE SKIP LOCKED) and writes nothing: the lock held
-- by the open transaction is the claim, so a claim costs a lock per job and no new row version.
-- The transaction then completes, fails or leases each job (job_complete_locked_*,
-- job_lease_locked) before it commits; a job it leaves alone, or a transaction that ends
-- without a commit, leaves the row as it was. The attempt returned is the one the job runs as.
-- @else
-- @if order=fifo
-- Claims up to `limit` due jobs of a queue under one new lease, claim-token strategy, FIFO: by
-- priority, then due time, then id.
-- @else
-- Claims up to `limit` due jobs of a queue under one new lease, claim-token strategy, LIFO: by
-- priority, then latest due time first.
-- @end
-- Claim-token strategy (seeds S3, S5): no SKIP LOCKED;
-- job_select_token reads the claimed rows. Rows are locked in id order (FOR UPDATE after ORDER BY
-- id), as completions' primary-key scans visit them, so claimers that wait on each other or on
-- completions do not deadlock (a plan that visits rows otherwise can; the victim's claim is retried
-- whole). A row another claimer took first fails the state recheck after the wait and is left out.
-- @end
-- @if mode=plain order=fifo
-- @else
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- @end
-- @if mode=locked
-- Lock waits: 50 ms at most, for this transaction (see job_complete_with_claim_delete_fifo).
-- A client that falls silent mid-transaction (cut off by the network, say) holds the jobs no
-- longer than `idle_ms` (the claim's lease): the server ends the session then
-- (idle_in_transaction_session_timeout, for this transaction alone), and the jobs are free.
-- @end
-- @if order=fifo mode!=token
-- @include cursor_doc
-- @end
-- @if mode!=locked
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @end
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @if mode=locked
-- @param idle_ms: i64
-- @end
-- @if order=fifo mode!=token
-- @param cursor: &[i64]
-- @end
WITH heads AS MATERIALIZED (
-- @if mode=locked
    SELECT n, floor(random() * n)::int AS first,
           set_config('lock_timeout', '50ms', true) AS lock_timeout,
           set_config('idle_in_transaction_session_timeout', ${idle_ms}::bigint::text, true) AS idle
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = ${queue}) AS q
)
SELECT
    -- @include claim_columns p=c. next=yes
FROM heads AS q
CROSS JOIN generate_series(0, 255) AS s(i)
CROSS JOIN LATERAL (
    SELECT id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context,
           group_key{{? order=fifo : , shard}}
    FROM backlog_job
    WHERE queue = ${queue} AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= ${now}
-- @if order=fifo
      -- @include cursor
-- @end
      AND (${kinds}::text[] IS NULL OR kind = ANY(${kinds}::text[]))
    -- @include order
    LIMIT ${limit}
    FOR UPDATE SKIP LOCKED
) AS c
WHERE s.i < q.n
LIMIT ${limit}
-- @else
    SELECT n, floor(random() * n)::int AS first
-- @include claim_shards
-- @if mode=token
), locked AS (
    SELECT id FROM backlog_job
    WHERE id = ANY(ARRAY(SELECT id FROM picked)) AND state = 'available'
    ORDER BY id
    FOR UPDATE
-- @end
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = ${token}, lease_owner = ${owner},
    lease_expires_at = ${expires}, attempted_at = ${now}
-- @if mode=token
WHERE j.id = ANY(ARRAY(SELECT id FROM locked))
-- @else
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
-- @if mode=plain
-- Not the queue, token or lease expiry: the claimer chose them.
-- @end
RETURNING
    -- @include claim_columns p=j. next=no
-- @end
-- @end
