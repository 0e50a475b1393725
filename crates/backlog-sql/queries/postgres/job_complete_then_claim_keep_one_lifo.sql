-- @generated from templates/postgres/job_complete_claim.sql by tests/templates.rs: edit the template
-- Completes a worker's finished jobs and claims its next ones in one statement and one commit.
-- Returns a row per claimed job (done_ids NULL), then one more row whose done_ids are the
-- completed ids (NULL when none) and whose other columns are NULL. A UNION ALL row costs the
-- database less than joining the ids onto the claimed rows (scripts/pg_claim_costs.py). Both
-- parts see one snapshot and touch disjoint rows (the completed jobs are running under the
-- caller's tokens; the claimed ones available).
-- The completed jobs are kept (moved to backlog_job_done, below).
-- They ran under one lease token (`done_token`).
-- Order: LIFO, by priority, then latest due time first.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- Lock waits: 50 ms at most (lock_timeout, for this statement's transaction alone), then the
-- statement fails with 55P03 and the caller runs it again. A claim's SKIP LOCKED does not
-- skip everything: reaching a row whose newer version another claimer is deleting, it
-- waits for that claimer, which may be waiting to delete a row this one just locked; such a
-- deadlock held both for deadlock_timeout (1 s by default) before one gave way. `heads` is
-- read before any row is locked: the claim reads it first, and the completion comes after
-- the claim's pick (it waits for picked, or follows claimed in the UNION ALL).
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param done_ids: &[i64]
-- @param done_token: i64
-- @param done_now: i64
WITH gone AS (
    DELETE FROM backlog_job
    WHERE id = ANY($8::bigint[]) AND state = 'running'
      AND lease_token = $9::bigint
    RETURNING *
), done AS (
    INSERT INTO backlog_job_done
        (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
         lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
         attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard,
         slot)
    SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
           lease_owner, NULL, unique_key, errors, result, progress, created_at,
           attempted_at, $10, cancel_requested_at, trace_context, group_key, shard,
           (SELECT (($10 / period_us) % 16)::smallint FROM backlog_job_done_ring)
    FROM gone
    RETURNING id
), heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first,
           set_config('lock_timeout', '50ms', true) AS lock_timeout
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at DESC, id DESC
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
),
claimed AS (
    UPDATE backlog_job j
    SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
        lease_expires_at = $3, attempted_at = $4
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING
        j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
        j.run_at, j.created_at, j.trace_context, j.group_key
)
SELECT NULL::bigint[] AS done_ids, c.* FROM claimed AS c
UNION ALL
SELECT d.done_ids, c.* FROM (SELECT array_agg(id) AS done_ids FROM done) AS d
LEFT JOIN claimed AS c ON false
