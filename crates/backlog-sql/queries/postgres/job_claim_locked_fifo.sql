-- @generated from templates/postgres/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue in transaction claim mode, FIFO: by priority, then due
-- time, then id.
-- It locks the rows (FOR UPDATE SKIP LOCKED) and writes nothing: the lock held
-- by the open transaction is the claim, so a claim costs a lock per job and no new row version.
-- The transaction then completes, fails or leases each job (job_complete_locked_*,
-- job_lease_locked) before it commits; a job it leaves alone, or a transaction that ends
-- without a commit, leaves the row as it was. The attempt returned is the one the job runs as.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- Lock waits: 50 ms at most, for this transaction (see job_complete_with_claim_delete_fifo).
-- A client that falls silent mid-transaction (cut off by the network, say) holds the jobs no
-- longer than `idle_ms` (the claim's lease): the server ends the session then
-- (idle_in_transaction_session_timeout, for this transaction alone), and the jobs are free.
-- Cursor: each shard's claim starts past `cursor` (three values a shard: priority, run_at,
-- id; src/cursor.rs), past the index entries that claimed and completed jobs leave
-- behind while a held snapshot keeps vacuum from removing them. Empty, or a shard beyond
-- it: from the head (a full pass).
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param idle_ms: i64
-- @param cursor: &[i64]
WITH heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first,
           set_config('lock_timeout', '50ms', true) AS lock_timeout,
           set_config('idle_in_transaction_session_timeout', $5::bigint::text, true) AS idle
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $2) AS q
)
SELECT
    c.id, c.kind, c.payload::text AS payload, c.priority, c.attempt + 1 AS attempt, c.max_attempts,
    c.run_at, c.created_at, c.trace_context, c.group_key, c.shard
FROM heads AS q
CROSS JOIN generate_series(0, 255) AS s(i)
CROSS JOIN LATERAL (
    SELECT id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context,
           group_key, shard
    FROM backlog_job
    WHERE queue = $2 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $1
      AND (priority, run_at, id) > (COALESCE(($6::bigint[])[3 * ((q.first + s.i) % q.n) + 1], -32768)::smallint,
                                    COALESCE(($6::bigint[])[3 * ((q.first + s.i) % q.n) + 2], -9223372036854775807),
                                    COALESCE(($6::bigint[])[3 * ((q.first + s.i) % q.n) + 3], -9223372036854775807))
      AND ($3::text[] IS NULL OR kind = ANY($3::text[]))
    ORDER BY priority, run_at, id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
) AS c
WHERE s.i < q.n
LIMIT $4
